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
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cpu/blas.h"
#include "libcore/app.h"
#include "libcore/io/atomic_file.h"
#include "libcore/model/transformer.h"
#include "tests/bench/reference.h"

#ifndef TFM_BENCH_SOURCE_DIR
#define TFM_BENCH_SOURCE_DIR "tests/bench"
#endif

using namespace tfm;

namespace {

using Clock = std::chrono::steady_clock;

// Exit status when tfm falls under the target ratio (1 is an error).
constexpr int kSlow = 3;
// tfm tokens/s over PyTorch tokens/s that counts as ok.
constexpr double kTargetRatio = 2.0;

struct Options {
  CommonOptions common;
  std::string preset = "base";
  int64_t tokens = 4000;
  int64_t src_len = 25;
  int64_t tgt_len = 25;
  int steps = 5;
  std::string device = "cpu";
  std::string out = "model.tsv";
  bool no_reference = false;
  std::string python = "/usr/bin/python3";
  std::string script = TFM_BENCH_SOURCE_DIR "/model_pytorch.py";
};

// Sentence lengths cycle from the given length down by up to 4 words, so
// the batch has padding on both sides; sentences are added until the
// target side (words + eos) holds `tokens` tokens.
HostBatch make_batch(const Options& o, int64_t vocab) {
  std::vector<std::vector<int32_t>> sources, targets;
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next_id = [&] {  // ids in [4, V): 0..3 are pad, unk, bos, eos
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int32_t>(4 + (state >> 33) % static_cast<uint64_t>(vocab - 4));
  };
  int64_t target_tokens = 0;
  for (int64_t i = 0; target_tokens < o.tokens; ++i) {
    const int64_t s = std::max<int64_t>(1, o.src_len - i % 5);
    const int64_t t = std::max<int64_t>(1, o.tgt_len - (i + 2) % 5);
    std::vector<int32_t> src(s), tgt(t);
    for (auto& id : src) id = next_id();
    for (auto& id : tgt) id = next_id();
    sources.push_back(std::move(src));
    targets.push_back(std::move(tgt));
    target_tokens += t + 1;
  }
  return HostBatch::from_pairs(sources, targets);
}

// Time spent inside OpenBLAS sgemm, by swapping a timing wrapper into the
// process's one Blas table (kernels/cpu/blas.h). Every CPU GEMM of the model
// goes through it, so the share is measured, not estimated; a
// steady_clock read costs tens of nanoseconds against calls of microseconds
// and more. Not available on CUDA (kernels run asynchronously).
struct GemmClock {
  static inline ops::cpu::Blas::Sgemm real = nullptr;
  static inline std::atomic<int64_t> nanoseconds{0};

  static void timed(ops::cpu::CblasOrder order, ops::cpu::CblasTranspose ta,
                    ops::cpu::CblasTranspose tb, int m, int n, int k, float alpha,
                    const float* a, int lda, const float* b, int ldb, float beta, float* c,
                    int ldc) {
    const auto start = Clock::now();
    real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    nanoseconds += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start)
                       .count();
  }

  // The table is a function-local static that is not const itself, so
  // writing through the const reference blas() returns is well defined.
  static void install() {
    auto& blas = const_cast<ops::cpu::Blas&>(ops::cpu::blas());
    if (blas.sgemm == &timed) return;
    real = blas.sgemm;
    blas.sgemm = &timed;
  }
};

struct TfmResult {
  double tokens_per_s = 0;
  double seconds = 0;
  double gemm_share = -1;  // < 0: not measured
};

TfmResult run_tfm(const Options& o, const ModelConfig& config, const HostBatch& batch,
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
  if (device.is_cpu()) GemmClock::install();

  TrainStep step;  // dropout on, as in training
  auto one_step = [&](uint32_t n) {
    step.rng_step = n;
    model.zero_grads();
    model.forward_backward(batch, step);
  };
  one_step(0);  // warm-up: first touch of planned memory, thread pools, kernel choice
  model.stream().synchronize();

  GemmClock::nanoseconds = 0;
  const auto start = Clock::now();
  for (int i = 0; i < o.steps; ++i) one_step(static_cast<uint32_t>(i + 1));
  model.stream().synchronize();
  TfmResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.tokens_per_s = static_cast<double>(batch.target_tokens) * o.steps / r.seconds;
  if (device.is_cpu()) r.gemm_share = GemmClock::nanoseconds.load() * 1e-9 / r.seconds;
  return r;
}

struct TorchResult {
  double tokens_per_s = 0;
  long long params = 0;
  int threads = 0;
  std::string version;
};

std::string join_lengths(const std::vector<int32_t>& lengths) {
  std::string s;
  for (size_t i = 0; i < lengths.size(); ++i) s += fmt::format("{}{}", i ? "," : "", lengths[i]);
  return s;
}

// Runs model_pytorch.py as a child on a batch of the same shape: the same
// source lengths, and decoder lengths of target words + 1 (tgt_lengths
// already counts the eos, and the decoder input has bos in its place).
TorchResult run_reference(const Options& o, const ModelConfig& config, const HostBatch& batch,
                          Device device) {
  TFM_REQUIRE(config.heads * config.d_k == config.d_model &&
                  config.heads * config.d_v == config.d_model,
              "the PyTorch reference needs heads * d_k = heads * d_v = d_model, but preset {} "
              "has {} x {} (d_v {}) against d_model {}",
              o.preset, config.heads, config.d_k, config.d_v, config.d_model);
  TFM_REQUIRE(config.share_embeddings && !config.learned_positions,
              "the PyTorch reference builds shared embeddings with sinusoidal positions only");
  TFM_REQUIRE(access(o.script.c_str(), R_OK) == 0, "cannot read the PyTorch reference {}",
              o.script);
  const std::string cmd = fmt::format(
      "{} {} --vocab {} --layers {} --d-model {} --d-ff {} --heads {} --dropout {} "
      "--label-smoothing {}{} --steps {} --warmup 1 --threads {} --device {} "
      "--src-lengths {} --tgt-lengths {}",
      o.python, o.script, config.vocab_size, config.layers, config.d_model, config.d_ff,
      config.heads, config.dropout, config.label_smoothing, config.pre_norm ? " --pre-norm" : "",
      o.steps, cpu_threads(), device.is_cuda() ? fmt::format("cuda:{}", device.index) : "cpu",
      join_lengths(batch.src_lengths), join_lengths(batch.tgt_lengths));
  const std::string result = bench::run_reference(cmd, o.python);
  TorchResult r;
  char version[128] = {0};
  if (std::sscanf(result.c_str(), "tokens_per_s=%lf %*s %*s %*s params=%lld threads=%d torch=%127s",
                  &r.tokens_per_s, &r.params, &r.threads, version) != 4 || !(r.tokens_per_s > 0))
    fail("the PyTorch reference printed an unexpected result: {}", result);
  r.version = version;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Model benchmark: tfm training throughput against PyTorch on the same machine."};
  add_common_options(app, o.common);
  app.add_option("--preset", o.preset, "Model preset: base, big or tiny")->capture_default_str();
  app.add_option("--tokens", o.tokens, "Target tokens per batch (eos included)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--src-len", o.src_len, "Longest source sentence (words); lengths cycle down by up to 4")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--tgt-len", o.tgt_len, "Longest target sentence (words); lengths cycle down by up to 4")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--steps", o.steps, "Timed steps, after one warm-up step")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--device", o.device, "cpu, or cuda[:N] when built with CUDA and a GPU is usable")
      ->capture_default_str();
  app.add_option("--out", o.out, "Write the results as TSV to this file")->capture_default_str();
  app.add_flag("--no-reference", o.no_reference, "Time tfm alone (no PyTorch, no verdict)");
  app.add_option("--python", o.python, "Interpreter with torch for the reference")
      ->capture_default_str();
  app.add_option("--script", o.script, "The PyTorch reference script")->capture_default_str();
  int status = 0;
  const int rc = run_program("model", app, argc, argv, o.common, [&] {
    const Device device = select_device(parse_device(o.device));
    const ModelConfig config = ModelConfig::preset(o.preset);
    const HostBatch batch = make_batch(o, config.vocab_size);
    std::printf("%s model on %s (%d threads), %lld sentences, batch (B %lld, S %lld, T %lld), "
                "%lld target tokens, %d steps after 1 warm-up, dropout on\n",
                o.preset.c_str(), device.is_cpu() ? cpu_name().c_str() : device.str().c_str(),
                cpu_threads(), static_cast<long long>(batch.batch),
                static_cast<long long>(batch.batch), static_cast<long long>(batch.src_len),
                static_cast<long long>(batch.tgt_len),
                static_cast<long long>(batch.target_tokens), o.steps);
    std::fflush(stdout);

    const TfmResult mine = run_tfm(o, config, batch, device);  // the model is freed here
    TorchResult ref;
    if (!o.no_reference) {
      ref = run_reference(o, config, batch, device);
      std::printf("pytorch: torch %s, %d threads, %.2f M parameters\n", ref.version.c_str(),
                  ref.threads, ref.params / 1e6);
    }
    const bool has_ref = ref.tokens_per_s > 0;
    const double ratio = has_ref ? mine.tokens_per_s / ref.tokens_per_s : 0;
    const bool ok = !has_ref || ratio >= kTargetRatio;

    std::printf("\n%-7s %-7s %8s %12s %12s %7s  %s\n", "preset", "device", "tokens", "tfm tok/s",
                "torch tok/s", "ratio", "verdict");
    const std::string verdict = !has_ref ? "no reference"
                                : ok     ? fmt::format("ok (>= {:.1f}x)", kTargetRatio)
                                         : fmt::format("SLOW (< {:.1f}x)", kTargetRatio);
    std::printf("%-7s %-7s %8lld %12.1f %12s %6s  %s\n", o.preset.c_str(), device.str().c_str(),
                static_cast<long long>(batch.target_tokens), mine.tokens_per_s,
                has_ref ? fmt::format("{:.1f}", ref.tokens_per_s).c_str() : "-",
                has_ref ? fmt::format("{:.2f}x", ratio).c_str() : "-", verdict.c_str());
    if (mine.gemm_share >= 0)
      std::printf("\ntfm: %.0f%% of the step in OpenBLAS sgemm (%.3f s of %.3f s)\n",
                  mine.gemm_share * 100, mine.gemm_share * mine.seconds, mine.seconds);
    std::printf("\ntarget tokens/s, forward + backward; ratio = tfm / PyTorch. Written to %s\n",
                o.out.c_str());

    std::string tsv =
        "preset\tdevice\tB\tS\tT\ttarget_tokens\tsteps\tthreads\t"
        "tfm_tokens_per_s\ttorch_tokens_per_s\tratio\ttarget_ratio\tgemm_share\tok\n";
    tsv += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{:.1f}\t{}\t{}\t{:.1f}\t{}\t{}\n", o.preset,
                       device.str(), batch.batch, batch.src_len, batch.tgt_len,
                       batch.target_tokens, o.steps, cpu_threads(), mine.tokens_per_s,
                       has_ref ? fmt::format("{:.1f}", ref.tokens_per_s) : "",
                       has_ref ? fmt::format("{:.3f}", ratio) : "", kTargetRatio,
                       mine.gemm_share >= 0 ? fmt::format("{:.3f}", mine.gemm_share) : "",
                       has_ref ? (ok ? "1" : "0") : "");
    io::write_file_atomic(o.out, tsv);
    status = ok ? 0 : kSlow;
  });
  return rc != 0 ? rc : status;
}
