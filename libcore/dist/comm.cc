#include "libcore/dist/comm.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "libcore/base/device.h"
#include "libcore/base/error.h"
#include "libcore/base/log.h"
#include "libcore/dist/nccl.h"

#ifdef TFM_WITH_MPI
#include <mpi.h>
#include <omp.h>
#endif

namespace tfm::dist {

bool launched_by_mpi() {
  // Open MPI's mpirun, MPICH's and Intel's hydra (PMI), PMIx (Slurm's srun
  // --mpi=pmix, Open MPI 5), MVAPICH.
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

namespace {

using Clock = std::chrono::steady_clock;

// Sleeps between polls: short at first (a sum is often done in
// microseconds), then up to a millisecond, so a waiting rank leaves the
// cores to the others.
class Backoff {
 public:
  void pause() {
    std::this_thread::sleep_for(std::chrono::microseconds(us_));
    us_ = std::min(us_ * 2, 1000);
  }

 private:
  int us_ = 10;
};

std::string seconds_text(double s) { return fmt::format("{:g} s", s); }

}  // namespace

#ifdef TFM_WITH_MPI

namespace {

MPI_Comm& mpi(void* native) { return *static_cast<MPI_Comm*>(native); }

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    default: fail("a gradient sum of {} is not supported (f32 or f64)", dtype_name(t));
  }
}

// Tags of tfm's own messages (on tfm's own communicator: no one else's):
// agree()'s, and the roll call a rank makes when a wait runs out.
constexpr int kTagArrive = 71, kTagDecision = 72, kTagRollCall = 73, kTagPresent = 74;

}  // namespace

struct Comm::Pending {
  std::vector<MPI_Request> requests;
};

Comm::Comm() : pending_(std::make_unique<Pending>()) {
  if (!launched_by_mpi()) return;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      fail("MPI could not start (MPI_Init_thread)");
  }
  auto* comm = new MPI_Comm;
  MPI_Comm_dup(MPI_COMM_WORLD, comm);
  native_ = comm;
  MPI_Comm_rank(*comm, &rank_);
  MPI_Comm_size(*comm, &size_);
  MPI_Comm local;
  MPI_Comm_split_type(*comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &local_rank_);
  MPI_Comm_size(local, &local_size_);
  MPI_Comm_free(&local);
  // Ranks of one machine share its cores: unless told, each takes its part
  // (OpenMP's and OpenBLAS's threads, which follow OpenMP's).
  if (local_size_ > 1 && !std::getenv("OMP_NUM_THREADS"))
    omp_set_num_threads(std::max(1, cpu_threads() / local_size_));
}

Comm::~Comm() {
  if (!native_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Comm_free(&mpi(native_));
  delete static_cast<MPI_Comm*>(native_);
  MPI_Finalize();
}

// A rank that waits answers the roll calls of the others (answer()); a
// rank whose wait runs out calls the roll (roll_call()) and names those who
// do not answer: they died, hang, or are busy past the timeout.
void Comm::answer() {
  while (true) {
    int asked = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kTagRollCall, mpi(native_), &asked, &status);
    if (!asked) return;
    char c = 0;
    MPI_Recv(&c, 1, MPI_CHAR, status.MPI_SOURCE, kTagRollCall, mpi(native_), MPI_STATUS_IGNORE);
    MPI_Send(&c, 1, MPI_CHAR, status.MPI_SOURCE, kTagPresent, mpi(native_));
  }
}

std::string Comm::roll_call() {
  const int others = size_ - 1;
  std::vector<char> out(static_cast<size_t>(size_)), in(static_cast<size_t>(size_));
  std::vector<MPI_Request> sent, heard;
  std::vector<int> who;
  for (int k = 0; k < size_; ++k) {
    if (k == rank_) continue;
    sent.emplace_back();
    heard.emplace_back();
    who.push_back(k);
    MPI_Isend(&out[static_cast<size_t>(k)], 1, MPI_CHAR, k, kTagRollCall, mpi(native_), &sent.back());
    MPI_Irecv(&in[static_cast<size_t>(k)], 1, MPI_CHAR, k, kTagPresent, mpi(native_), &heard.back());
  }
  // Long enough for a rank in any wait to answer, short next to the timeout.
  const auto deadline = Clock::now() + std::chrono::duration<double>(std::min(timeout_, 10.0));
  std::vector<bool> present(static_cast<size_t>(others), false);
  Backoff backoff;
  while (Clock::now() < deadline) {
    answer();  // another rank may be calling the roll too
    bool all = true;
    for (size_t i = 0; i < heard.size(); ++i) {
      if (!present[i]) {
        int done = 0;
        MPI_Test(&heard[i], &done, MPI_STATUS_IGNORE);
        present[i] = done != 0;
      }
      all = all && present[i];
    }
    if (all) return {};
    backoff.pause();
  }
  std::string missing;
  for (size_t i = 0; i < who.size(); ++i)
    if (!present[i]) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", who[i]);
  return missing;
}

// Every wait of MPI requests: answering roll calls, and past the deadline
// naming who does not answer.
struct Waits {
  static void wait(Comm& c, std::vector<MPI_Request>& requests, std::string_view what) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(c.timeout_);
    Backoff backoff;
    while (true) {
      int done = 0;
      MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
      if (done) return;
      c.answer();
      if (Clock::now() > deadline) c.lost(what);
      backoff.pause();
    }
  }
};

namespace {
void wait(Comm& c, std::vector<MPI_Request>& requests, std::string_view what) {
  Waits::wait(c, requests, what);
}
}  // namespace

void Comm::lost(std::string_view what) {
  const std::string missing = roll_call();
  if (missing.empty())
    abort(fmt::format("{}: no answer within {}, though every rank answers the roll: the ranks ran "
                      "apart",
                      what, seconds_text(timeout_)));
  abort(fmt::format("{}: rank {} did not answer within {}: it died or hangs", what, missing,
                    seconds_text(timeout_)));
}

std::vector<std::string> Comm::all_gather(const std::string& mine, std::string_view what) {
  if (!distributed()) return {mine};
  int64_t length = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths(static_cast<size_t>(size_));
  std::vector<MPI_Request> r(1);
  MPI_Iallgather(&length, 1, MPI_INT64_T, lengths.data(), 1, MPI_INT64_T, mpi(native_), r.data());
  wait(*this, r, what);
  std::vector<int> counts(lengths.begin(), lengths.end()), offsets(lengths.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) offsets[i] = offsets[i - 1] + counts[i - 1];
  std::string all(static_cast<size_t>(offsets.back() + counts.back()), '\0');
  MPI_Iallgatherv(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(), counts.data(),
                  offsets.data(), MPI_CHAR, mpi(native_), r.data());
  wait(*this, r, what);
  std::vector<std::string> out;
  for (size_t i = 0; i < counts.size(); ++i)
    out.emplace_back(all.substr(static_cast<size_t>(offsets[i]), static_cast<size_t>(counts[i])));
  return out;
}

void Comm::all_reduce_sum(std::span<double> values, std::string_view what) {
  if (!distributed() || values.empty()) return;
  std::vector<MPI_Request> r(1);
  MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_SUM,
                 mpi(native_), r.data());
  wait(*this, r, what);
}

int64_t Comm::agree(int64_t step, int64_t code) {
  if (!distributed()) return code;
  const std::string what = fmt::format("the ranks' agreement before update {}", step);
  if (rank_ == 0) {
    std::vector<int64_t> heard(2 * static_cast<size_t>(size_));
    std::vector<MPI_Request> r(static_cast<size_t>(size_ - 1));
    for (int k = 1; k < size_; ++k)
      MPI_Irecv(&heard[2 * static_cast<size_t>(k)], 2, MPI_INT64_T, k, kTagArrive, mpi(native_),
                &r[static_cast<size_t>(k - 1)]);
    wait(*this, r, what);
    int64_t decision = code;
    for (int k = 1; k < size_; ++k) {
      const int64_t theirs = heard[2 * static_cast<size_t>(k)];
      if (theirs != step)
        abort(fmt::format("rank {} is at update {}, rank 0 at update {}: the ranks ran apart", k, theirs,
                          step));
      decision = std::max(decision, heard[2 * static_cast<size_t>(k) + 1]);
    }
    for (int k = 1; k < size_; ++k)
      MPI_Isend(&decision, 1, MPI_INT64_T, k, kTagDecision, mpi(native_), &r[static_cast<size_t>(k - 1)]);
    wait(*this, r, what);
    return decision;
  }
  int64_t mine[2] = {step, code}, decision = 0;
  std::vector<MPI_Request> r(2);
  MPI_Isend(mine, 2, MPI_INT64_T, 0, kTagArrive, mpi(native_), &r[0]);
  MPI_Irecv(&decision, 1, MPI_INT64_T, 0, kTagDecision, mpi(native_), &r[1]);
  wait(*this, r, what);
  return decision;
}

void Comm::start_sum(void* data, int64_t count, DType dtype) {
  if (!distributed() || count == 0) return;
  TFM_REQUIRE(count <= INT32_MAX, "a gradient sum of {} elements is over MPI's count", count);
  MPI_Request r;
  MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), mpi_type(dtype), MPI_SUM, mpi(native_), &r);
  pending_->requests.push_back(r);
}

void Comm::progress() {
  if (pending_->requests.empty()) return;
  int done = 0;
  MPI_Testall(static_cast<int>(pending_->requests.size()), pending_->requests.data(), &done,
              MPI_STATUSES_IGNORE);
}

void Comm::finish_sums(std::string_view what) {
  if (pending_->requests.empty()) return;
  wait(*this, pending_->requests, what);
  pending_->requests.clear();
}

void Comm::abort(const std::string& line) {
  if (!distributed()) throw Error(line);
  log::error("rank {}: {}", rank_, line);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);  // MPI_Abort does not return; should it, leave anyway
}

#else  // a build without MPI: always a group of one

struct Comm::Pending {};

Comm::Comm() : pending_(std::make_unique<Pending>()) {}
Comm::~Comm() = default;

std::vector<std::string> Comm::all_gather(const std::string& mine, std::string_view) { return {mine}; }
void Comm::all_reduce_sum(std::span<double>, std::string_view) {}
int64_t Comm::agree(int64_t, int64_t code) { return code; }
void Comm::start_sum(void*, int64_t, DType) {}
void Comm::progress() {}
void Comm::finish_sums(std::string_view) {}
void Comm::answer() {}
void Comm::lost(std::string_view what) { throw Error(fmt::format("{}: no progress within {}", what, seconds_text(timeout_))); }
void Comm::abort(const std::string& line) { throw Error(line); }

#endif

std::string build_description() {
#ifdef TFM_WITH_MPI
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string s(version, static_cast<size_t>(length));
  s = s.substr(0, s.find_first_of(",\n"));
  const std::string nccl = nccl_version();
  return nccl.empty() ? s : s + ", " + nccl;
#else
  const std::string nccl = nccl_version();
  return nccl.empty() ? "none (built without MPI)" : "none (built without MPI); " + nccl + ", one rank";
#endif
}

Comm& Comm::world() {
  static Comm comm;
  return comm;
}

void Comm::wait_until(const std::function<bool()>& done, std::string_view what,
                      const std::function<std::string()>& health) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_);
  Backoff backoff;
  while (!done()) {
    if (health) {
      const std::string problem = health();
      if (!problem.empty()) abort(fmt::format("{}: {}", what, problem));
    }
    if (distributed()) answer();
    if (Clock::now() > deadline) lost(what);
    backoff.pause();
  }
}

}  // namespace tfm::dist
