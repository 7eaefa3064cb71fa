// tests/bench/data_parallel: what summing the gradient over the ranks costs
// a training update, and how much of it the overlap with backward hides
// (libcore/train/data_parallel.h). Run it as a job of K ranks:
//
//   mpirun -np 2 build/tests/bench/data_parallel [--presets base,big] [--tokens 1500]
//          [--steps 3] [--device cpu] [--precision fp32] [--bucket-mb 25] [--out FILE]
//
// For each preset, every rank times the same updates three ways, in turns
// (the slowest rank's time, the median of --steps):
//   alone    forward, backward and Adam, no sum (what one rank computes);
//   sum      the sum of the whole gradient alone (its buckets, in order);
//   together the updates with the sum overlapped, as tfm-train runs them.
// hidden = (alone + sum - together) / sum: the share of the sum's time the
// overlap takes off an update. On a GPU one rank runs the NCCL path (NCCL
// sums over one rank: its fixed costs). --project prints the paper's
// setting (8 GPUs on NVLink, 2 x 8 over InfiniBand) from a ring all-reduce
// model with the bandwidths stated (docs/guide.md, "Many GPUs and machines").
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/blas.h"
#include "libcore/app/app.h"
#include "libcore/base/precision.h"
#include "libcore/dist/comm.h"
#include "libcore/dist/nccl.h"
#include "libcore/io/atomic_file.h"
#include "libcore/train/data_parallel.h"
#include "libcore/train/options.h"
#include "libcore/train/step.h"
#include "tests/bench/reference.h"

using namespace tfm;

namespace {

using Clock = std::chrono::steady_clock;

// Exit status on a GPU in a build without NCCL (scripts/gpu-bench notes it).
constexpr int kNoNccl = 4;

struct Options {
  CommonOptions common;
  std::string presets = "base,big";
  int64_t tokens = 1500;
  int steps = 3;
  std::string device = "cpu";
  std::string precision = "fp32";
  int64_t bucket_mb = 25;
  std::string out = "data_parallel.tsv";
  bool project = false;
};

struct Row {
  std::string preset;
  int64_t params = 0;
  size_t buckets = 0;
  double alone = 0, sum = 0, together = 0;  // seconds an update (medians over ranks' max)
  double hidden() const { return sum > 0 ? std::clamp((alone + sum - together) / sum, 0.0, 1.0) : 0; }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

Row measure(const Options& o, const std::string& preset, dist::Comm& comm) {
  ModelConfig config = ModelConfig::preset(preset);
  config.vocab_size = 37000;
  const HostBatch batch = bench::make_batch(o.tokens, 25, 25, config.vocab_size);
  ModelLimits limits;
  limits.max_tokens = std::max(batch.batch * batch.src_len, batch.batch * batch.tgt_len);
  limits.max_len = std::max(batch.src_len, batch.tgt_len);
  const Device device = select_device(parse_device(o.device == "cuda" ? fmt::format("cuda:{}", comm.local_rank()) : o.device));
  const DType dtype = compute_dtype(kTrainPrecision.parse("--precision", o.precision));
  Transformer model(config, limits, device, dtype);
  model.init(1);
  Adam adam(model.optimizer_state().first, model.optimizer_state().second);
  train::GradientReducer reducer(comm, model, static_cast<size_t>(o.bucket_mb) << 20);
  train::LossScaler scaler(false);
  const std::vector<HostBatch> batches = {batch};
  int64_t step = 0;
  const auto update = [&](train::GradientReducer* r) {
    train::StepConfig sc;
    sc.step = ++step;
    sc.lr = 1e-5;
    sc.update_tokens = batch.target_tokens * comm.size();
    train::read_update(model, train::queue_update(model, adam, batches, sc, 1.0, r), scaler);
  };
  // One update's time, the slowest rank's (the ranks start together).
  const auto timed = [&](const auto& f) {
    double sync[] = {0};
    comm.all_reduce_sum(sync, "the bench's start");
    const auto start = Clock::now();
    f();
    model.stream().synchronize();
    double t[] = {std::chrono::duration<double>(Clock::now() - start).count()};
    std::vector<std::string> all = comm.all_gather(fmt::format("{}", t[0]), "the bench's times");
    double worst = 0;
    for (const std::string& s : all) worst = std::max(worst, std::stod(s));
    return worst;
  };
  update(&reducer);  // warm-up: first touch, plans, MPI's buffers
  std::vector<double> alone, sum, together;
  for (int i = 0; i < o.steps; ++i) {
    alone.push_back(timed([&] { update(nullptr); }));
    sum.push_back(timed([&] { reducer.finish(); }));  // every bucket, with nothing to overlap
    together.push_back(timed([&] { update(&reducer); }));
  }
  Row row;
  row.preset = preset;
  row.params = config.parameter_count();
  row.buckets = reducer.buckets();
  row.alone = median(alone);
  row.sum = median(sum);
  row.together = median(together);
  return row;
}

// A ring all-reduce of `bytes` over K GPUs: 2 (K - 1) / K of the data
// crosses each GPU's slowest link, plus 2 (K - 1) latencies.
double ring_seconds(double bytes, int k, double gb_per_s, double latency_us) {
  return 2.0 * (k - 1) / k * bytes / (gb_per_s * 1e9) + 2.0 * (k - 1) * latency_us * 1e-6;
}

void project() {
  // The paper's batch (25,000 target tokens an update) on H100s; compute
  // from the model FLOPs (6 x parameters x tokens) at the MFU targets of
  // the GPU issue (45% base, 55% big) of 800 TFLOP/s dense bf16; gradients
  // summed in f32. Bus bandwidths NCCL reaches: NVLink 4 (H100 SXM) about
  // 360 GB/s, 400 Gb/s InfiniBand NDR one rail per GPU about 45 GB/s;
  // latencies 5 us and 10 us a step of the ring.
  std::printf("\nprojection (ring all-reduce model, not measured):\n");
  std::printf("%-6s %10s %12s %12s %8s %12s %12s %10s\n", "preset", "params", "update ms", "backward ms",
              "GPUs", "sum ms", "exposed ms", "efficiency");
  for (const auto& [preset, params, mfu] : {std::tuple("base", 63.1e6, 0.45), std::tuple("big", 213.9e6, 0.55)}) {
    const double update = 6 * params * 25000 / (mfu * 800e12);
    const double backward = update * 2.0 / 3.0;
    const double bytes = 4 * params;
    for (const auto& [gpus, label] : {std::pair(8, "8"), std::pair(16, "2x8")}) {
      // Two machines: the sum is NVLink-bound inside a machine and IB-bound
      // across (NCCL's ring over 16 GPUs runs at the IB rail's rate).
      const double sum = gpus == 8 ? ring_seconds(bytes, 8, 360, 5) : ring_seconds(bytes, 16, 45, 10);
      // Buckets of 25 MiB start as backward goes: all but the last bucket's
      // sum can hide under the rest of backward.
      const double last = sum * std::min(1.0, 25.0 * (1 << 20) / bytes);
      const double exposed = std::max(last, sum - backward);
      std::printf("%-6s %9.1fM %12.1f %12.1f %8s %12.1f %12.1f %9.1f%%\n", preset, params / 1e6, update * 1e3,
                  backward * 1e3, label, sum * 1e3, exposed * 1e3, 100 * update / (update + exposed));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Data-parallel bench: the gradient sum's cost an update and the share the overlap hides "
               "(run under mpirun -np K)."};
  add_common_options(app, o.common);
  app.add_option("--presets", o.presets, "Comma-separated presets")->capture_default_str();
  app.add_option("--tokens", o.tokens, "Target tokens a rank's batch")->capture_default_str();
  app.add_option("--steps", o.steps, "Timed updates of each kind")->capture_default_str();
  app.add_option("--device", o.device, "cpu or cuda (each rank takes cuda:LOCAL_RANK)")->capture_default_str();
  app.add_option("--precision", o.precision, "fp32, bf16 or fp16 (the last two: cuda)")->capture_default_str();
  app.add_option("--bucket-mb", o.bucket_mb, "MiB a bucket")->capture_default_str();
  app.add_option("--out", o.out, "TSV file")->capture_default_str();
  app.add_flag("--project", o.project, "Also print the 8 and 2 x 8 GPU projection");
  bool no_nccl = false;
  const int rc = run_program("data_parallel", app, argc, argv, o.common, [&] {
    if (o.device != "cpu" && !dist::have_nccl()) {
      std::printf("skipped: this build has no NCCL, which sums gradients on GPUs\n");
      no_nccl = true;
      return;
    }
    dist::Comm& comm = dist::Comm::world();
    std::vector<Row> rows;
    std::stringstream list(o.presets);
    for (std::string p; std::getline(list, p, ',');) rows.push_back(measure(o, p, comm));
    if (comm.rank() != 0) return;
    std::printf("cpu: %s, blas core %s; %s\n", cpu_name().c_str(), ops::cpu::blas().core.c_str(),
                dist::build_description().c_str());
    std::printf("%d rank%s on %s, %s, %lld target tokens a rank, buckets of %lld MiB\n", comm.size(),
                comm.size() == 1 ? "" : "s", o.device.c_str(), o.precision.c_str(),
                static_cast<long long>(o.tokens), static_cast<long long>(o.bucket_mb));
    std::printf("%-6s %10s %8s %12s %12s %12s %10s %8s\n", "preset", "params", "buckets", "alone s",
                "sum s", "together s", "exposed s", "hidden");
    std::string tsv = "preset\tranks\tdevice\tparams\tbuckets\talone_s\tsum_s\ttogether_s\thidden\n";
    for (const Row& r : rows) {
      std::printf("%-6s %9.1fM %8zu %12.3f %12.3f %12.3f %10.3f %7.0f%%\n", r.preset.c_str(), r.params / 1e6,
                  r.buckets, r.alone, r.sum, r.together, std::max(0.0, r.together - r.alone), 100 * r.hidden());
      tsv += fmt::format("{}\t{}\t{}\t{}\t{}\t{:.4f}\t{:.4f}\t{:.4f}\t{:.3f}\n", r.preset, comm.size(), o.device,
                         r.params, r.buckets, r.alone, r.sum, r.together, r.hidden());
    }
    io::write_file_atomic(o.out, tsv);
    if (o.project) project();
  });
  return rc == 0 && no_nccl ? kNoNccl : rc;
}
