// tests/bench/model: training throughput of the whole model, forward and
// backward with dropout on, in target tokens per second, next to the same
// model in PyTorch measured in the same run on the same machine.
//
// The reference is tests/bench/model_pytorch.py, run as a child with
// /usr/bin/python3 (Debian's python3-torch) on a batch of the same shape and
// padding, with as many threads as tfm uses. tfm must reach 2x PyTorch's
// throughput; the exit status says whether it did (3 when it did not; 1 is
// an error, and so is a PyTorch that cannot be imported, unless
// --no-reference). Results go to a table on stdout and a TSV file (--out).
//
//   model [--preset base] [--tokens 4000] [--src-len 25] [--tgt-len 25]
//         [--steps 5] [--device cpu] [--out FILE] [--no-reference]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "libcore/app/app.h"
#include "libcore/io/atomic_file.h"
#include "libcore/model/transformer.h"
#include "tests/bench/reference.h"

using namespace tfm;

namespace {

using Clock = std::chrono::steady_clock;


struct TfmResult {
  double tokens_per_s = 0;
  double seconds = 0;
  double gemm_share = -1;  // < 0: not measured
  std::string gemm_summary;  // GemmClock::summary
};

TfmResult run_tfm(const bench::BenchOptions& o, const ModelConfig& config, const HostBatch& batch,
                  Device device) {
  ModelLimits limits;
  limits.max_tokens = std::max(batch.batch * batch.src_len, batch.batch * batch.tgt_len);
  limits.max_len = std::max(batch.src_len, batch.tgt_len);
  Transformer model(config, limits, device);
  std::printf("tfm: %s\n", model.memory_report().c_str());
  std::printf("tfm: %.2f M parameters (%lld)\n", config.parameter_count() / 1e6,
              static_cast<long long>(config.parameter_count()));
  std::fflush(stdout);
  model.init(1);
  if (device.is_cpu()) bench::GemmClock::install(o.gemm_shapes);

  TrainStep step;  // dropout on, as in training
  auto one_step = [&](uint32_t n) {
    step.rng_step = n;
    model.zero_grads();
    model.forward_backward(batch, step);
  };
  one_step(0);  // warm-up: first touch of planned memory, thread pools, kernel choice
  model.stream().synchronize();

  bench::GemmClock::reset();
  const auto start = Clock::now();
  for (int i = 0; i < o.steps; ++i) one_step(static_cast<uint32_t>(i + 1));
  model.stream().synchronize();
  TfmResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.tokens_per_s = static_cast<double>(batch.target_tokens) * o.steps / r.seconds;
  if (device.is_cpu()) {
    r.gemm_share = bench::GemmClock::nanoseconds.load() * 1e-9 / r.seconds;
    r.gemm_summary = bench::GemmClock::summary(r.seconds, o.steps);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bench::BenchOptions o;
  o.out = "model.tsv";
  CLI::App app{"Model benchmark: tfm training throughput against PyTorch on the same machine."};
  bench::add_bench_options(app, o);
  int status = 0;
  const int rc = run_program("model", app, argc, argv, o.common, [&] {
    const Device device = select_device(parse_device(o.device));
    const ModelConfig config = ModelConfig::preset(o.preset);
    const HostBatch batch = bench::make_batch(o.tokens, o.src_len, o.tgt_len, config.vocab_size);
    std::printf("%s model on %s (%d threads), %lld sentences, batch (B %lld, S %lld, T %lld), "
                "%lld target tokens, %d steps after 1 warm-up, dropout on\n",
                o.preset.c_str(), device.is_cpu() ? cpu_name().c_str() : device.str().c_str(),
                cpu_threads(), static_cast<long long>(batch.batch),
                static_cast<long long>(batch.batch), static_cast<long long>(batch.src_len),
                static_cast<long long>(batch.tgt_len),
                static_cast<long long>(batch.target_tokens), o.steps);
    std::fflush(stdout);

    const TfmResult mine = run_tfm(o, config, batch, device);  // the model is freed here
    bench::TorchResult ref;
    if (!o.no_reference) {
      bench::TorchRun run;
      run.python = o.python;
      run.script = o.script;
      run.preset = o.preset;
      run.steps = o.steps;
      ref = bench::run_torch(run, config, batch, device);
      std::printf("pytorch: torch %s, %d threads, %.2f M parameters\n", ref.version.c_str(),
                  ref.threads, ref.params / 1e6);
    }
    const bool has_ref = ref.tokens_per_s > 0;
    const double ratio = has_ref ? mine.tokens_per_s / ref.tokens_per_s : 0;
    const bool ok = !has_ref || ratio >= bench::kTargetRatio;

    std::printf("\n%-7s %-7s %8s %12s %12s %7s  %s\n", "preset", "device", "tokens", "tfm tok/s",
                "torch tok/s", "ratio", "verdict");
    const std::string verdict = !has_ref ? "no reference"
                                : ok     ? fmt::format("ok (>= {:.1f}x)", bench::kTargetRatio)
                                         : fmt::format("SLOW (< {:.1f}x)", bench::kTargetRatio);
    std::printf("%-7s %-7s %8lld %12.1f %12s %6s  %s\n", o.preset.c_str(), device.str().c_str(),
                static_cast<long long>(batch.target_tokens), mine.tokens_per_s,
                has_ref ? fmt::format("{:.1f}", ref.tokens_per_s).c_str() : "-",
                has_ref ? fmt::format("{:.2f}x", ratio).c_str() : "-", verdict.c_str());
    if (mine.gemm_share >= 0) std::printf("\n%s", mine.gemm_summary.c_str());
    std::printf("\ntarget tokens/s, forward + backward; ratio = tfm / PyTorch. Written to %s\n",
                o.out.c_str());

    std::string tsv =
        "preset\tdevice\tB\tS\tT\ttarget_tokens\tsteps\tthreads\t"
        "tfm_tokens_per_s\ttorch_tokens_per_s\tratio\ttarget_ratio\tgemm_share\tok\n";
    tsv += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{:.1f}\t{}\t{}\t{:.1f}\t{}\t{}\n", o.preset,
                       device.str(), batch.batch, batch.src_len, batch.tgt_len,
                       batch.target_tokens, o.steps, cpu_threads(), mine.tokens_per_s,
                       has_ref ? fmt::format("{:.1f}", ref.tokens_per_s) : "",
                       has_ref ? fmt::format("{:.3f}", ratio) : "", bench::kTargetRatio,
                       mine.gemm_share >= 0 ? fmt::format("{:.3f}", mine.gemm_share) : "",
                       has_ref ? (ok ? "1" : "0") : "");
    io::write_file_atomic(o.out, tsv);
    status = ok ? 0 : bench::kSlow;
  });
  return rc != 0 ? rc : status;
}
