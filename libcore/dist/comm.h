// The processes of one training run (docs/guide.md, "Many GPUs and
// machines"): one per GPU, started by an MPI launcher (mpirun -np K, Slurm's
// srun), with no transport of tfm's own. MPI numbers the processes (rank,
// size, and the rank among those of one machine, which picks its GPU) and
// carries the host's collectives: the ranks' agreement on the setup and on
// when to stop, dev-set sums, and the gradient's sum on the CPU. On GPUs
// NCCL sums the gradient (dist/nccl.h); MPI hands it its id.
//
// Every wait has a deadline (--dist-timeout): a rank that died or hangs
// makes the others stop with one line naming it (a rank whose wait runs
// out calls the roll, and every rank that waits answers), and the job is
// aborted; nothing waits forever. Every rank calls the collectives
// in the same order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/dtype.h"

namespace tfm::dist {

class Comm {
 public:
  // The run's group: MPI's world when this process was started by an MPI
  // launcher (Open MPI's, PMI's or PMIx's variables say so) in a build with
  // MPI; otherwise a group of one, with no MPI at all. Made on first use;
  // MPI is finalized at exit.
  static Comm& world();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // among the ranks of this machine
  int local_size() const { return local_size_; }
  bool distributed() const { return size_ > 1; }

  // Seconds a wait may take before the job is aborted (600 by default).
  void set_timeout(double seconds) { timeout_ = seconds; }
  double timeout() const { return timeout_; }

  // Every rank's `mine`, in rank order.
  std::vector<std::string> all_gather(const std::string& mine, std::string_view what);
  // Sums over the ranks, in place.
  void all_reduce_sum(std::span<double> values, std::string_view what);
  // The agreement before update `step`: the largest of the ranks' `code`s
  // (a reason to stop; 0: none). Rank 0 hears from every rank here, so a
  // rank that does not arrive is named; ranks at different updates are an
  // error.
  int64_t agree(int64_t step, int64_t code);

  // The gradient's sum over the ranks on the CPU (GradientReducer): sums
  // started one by one, in place (MPI_Iallreduce), while backward goes on;
  // progress() lets them move; finish_sums() waits for all of them.
  void start_sum(void* data, int64_t count, DType dtype);
  void progress();
  void finish_sums(std::string_view what);

  // Polls `done` until it holds, checking `health` (NCCL's asynchronous
  // errors: an error line, or empty) on the way; past the deadline, or on
  // an error, the job is aborted with a line naming `what`.
  void wait_until(const std::function<bool()>& done, std::string_view what,
                  const std::function<std::string()>& health = {});

  // Says `line` (tfm-NAME: error: rank R: LINE) and ends every rank's
  // process (MPI_Abort), or this process in a group of one.
  [[noreturn]] void abort(const std::string& line);

  // The raw MPI communicator (MPI_Comm), for NCCL's bootstrap; null in a
  // group of one.
  void* native() const { return native_; }

  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  ~Comm();

 private:
  Comm();
  struct Pending;
  void answer();                                       // the others' roll calls
  std::string roll_call();                             // the ranks that do not answer
  [[noreturn]] void lost(std::string_view what);       // a wait ran out: name, abort
  friend struct Waits;                                 // the MPI waits (comm.cc)

  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  double timeout_ = 600;
  void* native_ = nullptr;
  std::unique_ptr<Pending> pending_;  // the gradient sums in flight
};

// Whether this process was started by an MPI launcher (its environment).
bool launched_by_mpi();

// What this build runs several processes with, for tfm-info: "Open MPI
// v4.1.4, NCCL 2.28.9" or "none (built without MPI)".
std::string build_description();

}  // namespace tfm::dist
