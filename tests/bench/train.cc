// tests/bench/train: whole training steps, as tfm-train runs them
// (libcore/train/step.h: forward and backward with dropout, the gradient
// norm, the Adam update with the paper's schedule), in steps and target
// tokens per second, next to the same model and batch in PyTorch (with an
// Adam step) measured in the same run on the same machine, on the same
// batch (its ids are handed over in a file).
//
// The reference is tests/bench/model_pytorch.py --adam, run as a child with
// /usr/bin/python3 (Debian's python3-torch; --python for another) with as
// many threads as tfm uses, in tfm's --precision (bf16 / fp16: autocast) and,
// with --compile, torch.compile'd (scripts/gpu-bench: the paper's batch,
// --tokens 25000, in bf16 on a GPU). With --strong a second, stronger
// reference runs too (model_pytorch.py --strong: the whole step compiled
// with the loss, packed rows, tfm's exact architecture, the attention
// kernel that ran named). tfm must reach 2x the faster reference's
// throughput; the exit status says whether it did (3 when it did not; 1 is
// an error, and so is a PyTorch that cannot be imported, unless
// --no-reference). MFU (model FLOPs utilization) divides the step's exact
// matrix FLOPs (tests/bench/mfu.h; the terms are printed) by the card's
// specified dense peak (by its name, or --peak-tflops) and, with
// --gemm-peak, by the best bf16 GEMM rate measured on the card in the same
// run: two units, each named. Memory: tfm's peak resident set on the CPU; on a GPU its
// planned memory plus the high-water mark of the stream-ordered scratch pool,
// against PyTorch's caching allocator's peak reserved bytes. Results go to a
// table on stdout and a TSV file (--out).
//
//   train [--preset base] [--tokens 4000] [--src-len 25] [--tgt-len 25]
//         [--steps 5] [--update-freq 1] [--device cpu] [--precision fp32]
//         [--peak-tflops X] [--gemm-peak] [--out FILE] [--no-reference] [--compile] [--strong]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "libcore/app/app.h"
#include "libcore/base/memory.h"
#include "libcore/base/phases.h"
#include "libcore/io/atomic_file.h"
#include "libcore/train/options.h"
#include "libcore/train/step.h"
#include "tests/bench/mfu.h"
#include "tests/bench/reference.h"

using namespace tfm;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kWarmup = 4000;  // the schedule's, in both

struct Options : bench::BenchOptions {
  int64_t update_freq = 1;
  std::string precision = "fp32";
  double peak_tflops = 0;
  bool compile = false;
  bool strong = false;
  bool gemm_peak = false;
  bool phases = false;
};

struct TfmResult {
  double steps_per_s = 0;
  double tokens_per_s = 0;
  double seconds = 0;
  double gemm_share = -1;  // < 0: not measured
  std::string gemm_summary;  // GemmClock::summary
  size_t memory = 0;       // peak resident (CPU), or planned + scratch pool peak (GPU) bytes
  std::vector<phases::Total> phases;  // --phases: summed over o.steps more steps
};

TfmResult run_tfm(const Options& o, const ModelConfig& config, const HostBatch& batch,
                  Device device, Precision precision) {
  ModelLimits limits;
  limits.max_tokens = std::max(batch.batch * batch.src_len, batch.batch * batch.tgt_len);
  limits.max_len = std::max(batch.src_len, batch.tgt_len);
  const DType dtype = compute_dtype(precision);
  Transformer model(config, limits, device, dtype);
  std::printf("tfm: %s\n", model.memory_report().c_str());
  std::fflush(stdout);
  model.init(1);
  Adam adam(model.optimizer_state().first, model.optimizer_state().second);
  train::LossScaler scaler(precision == Precision::fp16);
  if (device.is_cpu()) bench::GemmClock::install(o.gemm_shapes);

  const std::vector<HostBatch> batches(static_cast<size_t>(o.update_freq), batch);
  // As tfm-train runs updates (trainer.cc): update n + 1 is queued before
  // update n is read (fp16 reads at once: its loss scale must be known).
  int64_t step = 0;
  std::optional<train::QueuedUpdate> flight;
  auto read = [&] {
    const train::StepResult r = train::read_update(model, *flight, scaler);
    TFM_REQUIRE(r.outcome == train::StepOutcome::applied, "an update was skipped (loss {})", r.sums.loss);
    flight.reset();
  };
  auto one_step = [&] {
    train::StepConfig sc;
    sc.step = ++step;
    sc.lr = noam_learning_rate(sc.step, config.d_model, kWarmup);
    sc.rng_counter = static_cast<uint32_t>((step - 1) * o.update_freq);
    sc.tf32 = precision == Precision::tf32;
    if (flight) {  // every update applies here: the retry is never taken
      sc.retry_step = sc.step - 1;
      sc.retry_lr = noam_learning_rate(sc.retry_step, config.d_model, kWarmup);
    }
    const train::QueuedUpdate q = train::queue_update(model, adam, batches, sc, scaler.scale());
    if (flight) read();
    flight = q;
    if (scaler.dynamic()) read();
  };
  bench::reset_pool_peak(device);
  one_step();  // warm-up: first touch of planned memory, thread pools, kernel choice
  if (flight) read();
  model.stream().synchronize();

  bench::GemmClock::reset();
  const auto start = Clock::now();
  for (int i = 0; i < o.steps; ++i) one_step();
  if (flight) read();
  model.stream().synchronize();
  TfmResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.steps_per_s = o.steps / r.seconds;
  r.tokens_per_s = r.steps_per_s * static_cast<double>(batch.target_tokens * o.update_freq);
  if (device.is_cpu()) {
    r.gemm_share = bench::GemmClock::nanoseconds.load() * 1e-9 / r.seconds;
    r.gemm_summary = bench::GemmClock::summary(r.seconds, o.steps);
  }
  if (o.phases) {  // more steps, apart from the timed ones: marks cost a little
    phases::start(model.stream());
    for (int i = 0; i < o.steps; ++i) one_step();
    if (flight) read();
    r.phases = phases::stop();
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  r.memory = device.is_cpu() ? static_cast<size_t>(usage.ru_maxrss) * 1024
                             : model.memory_bytes() + bench::pool_peak(device);
  return r;
}

std::string num(double x, const char* format = "{:.2f}") {
  return x > 0 ? fmt::format(fmt::runtime(format), x) : "-";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.out = "train.tsv";
  CLI::App app{"Training-step benchmark: tfm's step with Adam against PyTorch's on the same machine."};
  bench::add_bench_options(app, o);
  app.add_option("--update-freq", o.update_freq, "Batches accumulated into one update (tfm only)")
      ->check(tfm::AtLeast(int64_t{1}))->capture_default_str();
  app.add_option("--precision", o.precision, "fp32, tf32, bf16 or fp16 (all but fp32: CUDA)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}))->capture_default_str();
  app.add_option("--peak-tflops", o.peak_tflops,
                 "The peak TFLOP/s MFU is against [the card's specified dense bf16/fp16 peak, by its name]")
      ->check(tfm::Range(0.0, std::numeric_limits<double>::max()));
  app.add_flag("--gemm-peak", o.gemm_peak,
               "Measure the best bf16 GEMM rate here (4096-16384 squares) and give MFU against it too (CUDA)");
  app.add_flag("--strong", o.strong,
               "Also run the stronger PyTorch reference (model_pytorch.py --strong) and judge against the faster");
  app.add_flag("--compile", o.compile, "torch.compile the PyTorch model (where torch has it)");
  app.add_flag("--phases", o.phases,
               "Then time the phases of as many steps again (CUDA events; the host clock on the CPU)");
  int status = 0;
  const int rc = run_program("train", app, argc, argv, o.common, [&] {
    const Device device = select_device(parse_device(o.device));
    const Precision precision = kTrainPrecision.resolve(kTrainPrecision.parse("--precision", o.precision), device);
    const ModelConfig config = ModelConfig::preset(o.preset);
    const HostBatch batch = bench::make_batch(o.tokens, o.src_len, o.tgt_len, config.vocab_size);
    std::printf("%s model on %s (%d threads), %s, batch (B %lld, S %lld, T %lld) of %lld target "
                "tokens, %lld a step, %d steps after 1 warm-up; dropout, gradient norm, Adam\n",
                o.preset.c_str(), device.is_cpu() ? cpu_name().c_str() : device.str().c_str(),
                cpu_threads(), o.precision.c_str(), static_cast<long long>(batch.batch),
                static_cast<long long>(batch.src_len), static_cast<long long>(batch.tgt_len),
                static_cast<long long>(batch.target_tokens),
                static_cast<long long>(batch.target_tokens * o.update_freq), o.steps);
    std::fflush(stdout);

    const TfmResult mine = run_tfm(o, config, batch, device, precision);  // the model is freed here
    // tfm's numbers before the reference starts (a reference that dies or
    // runs out of time leaves them in the log).
    std::printf("tfm: %.3f steps/s, %.1f target tokens/s, memory %s\n", mine.steps_per_s,
                mine.tokens_per_s, format_bytes(mine.memory).c_str());
    std::fflush(stdout);
    // The references: model_pytorch.py as it was (nn.Transformer, padded,
    // the model compiled) and, with --strong, its stronger form (the whole
    // step compiled, packed rows, tfm's exact architecture). tfm is judged
    // against the faster of the two.
    std::vector<bench::TorchResult> refs;
    std::vector<const char*> ref_names;
    if (!o.no_reference) {
      TFM_REQUIRE(o.update_freq == 1 && precision != Precision::tf32,
                  "the PyTorch reference runs fp32, bf16 or fp16 steps of one batch: use "
                  "--no-reference with --update-freq or tf32");
      for (const bool strong : {false, true}) {
        if (strong && !o.strong) continue;
        bench::TorchRun run;
        run.python = o.python;
        run.script = o.script;
        run.preset = o.preset;
        run.steps = o.steps;
        run.adam = true;
        run.warmup = kWarmup;
        run.precision = o.precision;
        run.compile = o.compile;
        run.strong = strong;
        const bench::TorchResult& ref = refs.emplace_back(bench::run_torch(run, config, batch, device));
        ref_names.push_back(strong ? "strong" : "plain");
        std::printf("pytorch %s: torch %s, %d threads, %.2f M parameters, %s, attention %s%s%s, Adam %s, "
                    "compile %s%s\n", ref_names.back(), ref.version.c_str(), ref.threads, ref.params / 1e6,
                    o.precision.c_str(), ref.attention.c_str(),
                    ref.attention_impl.empty() ? "" : fmt::format(" ({})", ref.attention_impl).c_str(),
                    ref.sdpa.empty() ? "" : fmt::format(", SDPA backend {}", ref.sdpa).c_str(), ref.adam.c_str(),
                    ref.compile.c_str(), ref.loss.empty() ? "" : fmt::format(", loss {}", ref.loss).c_str());
        std::fflush(stdout);
      }
    }
    // The faster reference (the verdict's), and the plain one (the table's
    // historical columns).
    const bench::TorchResult none;
    const bench::TorchResult& ref = refs.empty() ? none : refs.front();
    const bench::TorchResult* best = nullptr;
    for (const bench::TorchResult& r : refs)
      if (!best || r.tokens_per_s > best->tokens_per_s) best = &r;
    const bool has_ref = best != nullptr;
    const double ratio = has_ref ? mine.tokens_per_s / ref.tokens_per_s : 0;
    const double best_ratio = has_ref ? mine.tokens_per_s / best->tokens_per_s : 0;
    const bool ok = !has_ref || best_ratio >= bench::kTargetRatio;

    // MFU: the step's exact matrix FLOPs (terms printed) over the card's
    // specified peak (or --peak-tflops) and over the best GEMM rate measured
    // here (--gemm-peak), never mixed.
    const bench::TrainingFlops flops = bench::training_flops(config, batch);
    const double step_flops = flops.step * static_cast<double>(o.update_freq);
    std::string card;
    const double spec = o.peak_tflops > 0 ? o.peak_tflops : bench::spec_peak_tflops(device, precision, &card);
    std::string gemm_detail;
    const double gemm_peak = o.gemm_peak ? bench::measured_gemm_peak_tflops(device, 5, &gemm_detail) : 0;
    auto tflops_of = [&](double steps_per_s) { return step_flops * steps_per_s / 1e12; };
    const double tflops = tflops_of(mine.steps_per_s);
    const double mfu = spec > 0 ? tflops / spec : 0;
    const double mfu_gemm = gemm_peak > 0 ? tflops / gemm_peak : 0;
    const double ref_tflops = has_ref ? tflops_of(o.steps / ref.seconds) : 0;
    const double ref_mfu = spec > 0 ? ref_tflops / spec : 0;

    int64_t source_tokens = 0;
    for (int32_t n : batch.src_lengths) source_tokens += n;
    std::printf("\n%-7s %-7s %-9s %7s %7s %9s %11s %6s %10s  %9s %11s %6s %10s  %6s  %s\n", "preset",
                "device", "precision", "src tok", "tgt tok", "tfm st/s", "tfm tok/s", "MFU", "memory",
                "torch st/s", "torch tok/s", "MFU", "memory", "ratio", "verdict");
    const std::string verdict = !has_ref ? "no reference"
                                : ok     ? fmt::format("ok (>= {:.1f}x the faster reference)", bench::kTargetRatio)
                                         : fmt::format("SLOW (< {:.1f}x the faster reference)", bench::kTargetRatio);
    auto percent = [](double x) { return x > 0 ? fmt::format("{:.1f}%", 100 * x) : std::string("-"); };
    std::printf("%-7s %-7s %-9s %7lld %7lld %9.3f %11.1f %6s %10s  %9s %11s %6s %10s  %6s  %s\n",
                o.preset.c_str(), device.str().c_str(), o.precision.c_str(),
                static_cast<long long>(source_tokens * o.update_freq),
                static_cast<long long>(batch.target_tokens * o.update_freq), mine.steps_per_s,
                mine.tokens_per_s, percent(mfu).c_str(), format_bytes(mine.memory).c_str(),
                has_ref ? num(o.steps / ref.seconds, "{:.3f}").c_str() : "-",
                has_ref ? num(ref.tokens_per_s, "{:.1f}").c_str() : "-", percent(ref_mfu).c_str(),
                has_ref && ref.peak_bytes > 0 ? format_bytes(ref.peak_bytes).c_str() : "-",
                has_ref ? fmt::format("{:.2f}x", ratio).c_str() : "-", verdict.c_str());
    for (size_t i = 0; i < refs.size(); ++i)
      std::printf("  tfm / pytorch %-6s %6.2fx  (torch %.1f tok/s, %.1f TFLOP/s, MFU %s of spec%s, %s)\n",
                  ref_names[i], mine.tokens_per_s / refs[i].tokens_per_s, refs[i].tokens_per_s,
                  tflops_of(o.steps / refs[i].seconds), percent(spec > 0 ? tflops_of(o.steps / refs[i].seconds) / spec : 0).c_str(),
                  gemm_peak > 0 ? fmt::format(", {} of the GEMM peak",
                                              percent(tflops_of(o.steps / refs[i].seconds) / gemm_peak)).c_str()
                                : "",
                  refs[i].peak_bytes > 0 ? format_bytes(refs[i].peak_bytes).c_str() : "memory -");
    if (mine.gemm_share >= 0) std::printf("\n%s", mine.gemm_summary.c_str());
    if (!mine.phases.empty()) {
      double total = 0;
      for (const phases::Total& p : mine.phases) total += p.seconds;
      std::printf("\nphases of a step (%s; a wait for the host counts to the phase before it):\n",
                  device.is_cpu() ? "host clock" : "CUDA events, the device's time");
      for (const phases::Total& p : mine.phases)
        std::printf("  %-40s %9.3f ms %6.1f%%\n", p.phase.c_str(), 1e3 * p.seconds / o.steps,
                    100 * p.seconds / total);
      std::printf("  %-40s %9.3f ms\n", "step", 1e3 * total / o.steps);
    }
    std::printf("\n%s", flops.describe().c_str());
    std::printf("tfm: %.1f TFLOP/s; MFU %s of %s%s; %s of the best bf16 GEMM measured here%s\n", tflops,
                percent(mfu).c_str(),
                spec > 0 ? fmt::format("{:g} TFLOP/s", spec).c_str() : "no peak (--peak-tflops)",
                o.peak_tflops > 0 ? " (--peak-tflops)"
                : card.empty()    ? ""
                                  : fmt::format(", the {}'s specified dense peak", card).c_str(),
                percent(mfu_gemm).c_str(),
                gemm_peak > 0 ? fmt::format(" ({:.1f} TFLOP/s: {})", gemm_peak, gemm_detail).c_str()
                              : " (not measured: --gemm-peak)");
    std::printf("\nwhole training steps; target tokens/s; ratio = tfm / PyTorch plain; memory: %s. "
                "Written to %s\n",
                device.is_cpu() ? "peak resident"
                                : "tfm planned + scratch pool peak, PyTorch's caching allocator peak",
                o.out.c_str());

    const bench::TorchResult& strong = refs.size() > 1 ? refs[1] : none;
    const bool has_strong = strong.tokens_per_s > 0;
    std::string tsv =
        "preset\tdevice\tprecision\tB\tS\tT\ttarget_tokens\tupdate_freq\tsteps\tthreads\t"
        "tfm_steps_per_s\ttfm_tokens_per_s\ttorch_steps_per_s\ttorch_tokens_per_s\tratio\t"
        "target_ratio\ttflops\tmfu\tmemory_bytes\tgemm_share\tok\t"
        "source_tokens\ttorch_mfu\ttorch_memory_bytes\ttorch_version\ttorch_compile\t"
        "step_flops\tspec_peak_tflops\tgemm_peak_tflops\tmfu_gemm\tcard\t"
        "strong_tokens_per_s\tstrong_ratio\tstrong_mfu\tstrong_memory_bytes\tstrong_attention\tstrong_sdpa\t"
        "strong_loss\tstrong_compile\tplain_sdpa\n";
    tsv += fmt::format(
        "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{:.4f}\t{:.1f}\t{}\t{}\t{}\t{:.1f}\t{:.4f}\t{}\t{}\t{}\t{}\t"
        "{}\t{}\t{}\t{}\t{}\t",
        o.preset, device.str(), o.precision, batch.batch, batch.src_len, batch.tgt_len,
        batch.target_tokens, o.update_freq, o.steps, cpu_threads(), mine.steps_per_s,
        mine.tokens_per_s, has_ref ? fmt::format("{:.4f}", o.steps / ref.seconds) : "",
        has_ref ? fmt::format("{:.1f}", ref.tokens_per_s) : "",
        has_ref ? fmt::format("{:.3f}", ratio) : "", bench::kTargetRatio, tflops,
        mfu > 0 ? fmt::format("{:.4f}", mfu) : "", mine.memory,
        mine.gemm_share >= 0 ? fmt::format("{:.3f}", mine.gemm_share) : "",
        has_ref ? (ok ? "1" : "0") : "", source_tokens * o.update_freq,
        ref_mfu > 0 ? fmt::format("{:.4f}", ref_mfu) : "",
        has_ref && ref.peak_bytes > 0 ? std::to_string(ref.peak_bytes) : "", ref.version, ref.compile);
    const double strong_tflops = has_strong ? tflops_of(o.steps / strong.seconds) : 0;
    tsv += fmt::format("{:.0f}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n", step_flops,
                       spec > 0 ? fmt::format("{:g}", spec) : "", gemm_peak > 0 ? fmt::format("{:.1f}", gemm_peak) : "",
                       mfu_gemm > 0 ? fmt::format("{:.4f}", mfu_gemm) : "", card,
                       has_strong ? fmt::format("{:.1f}", strong.tokens_per_s) : "",
                       has_strong ? fmt::format("{:.3f}", mine.tokens_per_s / strong.tokens_per_s) : "",
                       has_strong && spec > 0 ? fmt::format("{:.4f}", strong_tflops / spec) : "",
                       has_strong && strong.peak_bytes > 0 ? std::to_string(strong.peak_bytes) : "",
                       strong.attention_impl, strong.sdpa, strong.loss, strong.compile, ref.sdpa);
    io::write_file_atomic(o.out, tsv);
    status = ok ? 0 : bench::kSlow;
  });
  return rc != 0 ? rc : status;
}
