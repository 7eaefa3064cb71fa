#include "tests/bench/reference.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "libcore/base/device.h"
#include "libcore/base/error.h"
#include "libcore/io/atomic_file.h"

#ifdef TFM_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace tfm::bench {

void add_bench_options(CLI::App& app, BenchOptions& o) {
  add_common_options(app, o.common);
  app.add_option("--preset", o.preset, "Model preset: base, big or tiny")->capture_default_str();
  app.add_option("--tokens", o.tokens, "Target tokens per batch (eos included)")
      ->check(tfm::AtLeast(int64_t{1}))->capture_default_str();
  app.add_option("--src-len", o.src_len, "Longest source sentence (words); lengths cycle down by up to 4")
      ->check(tfm::AtLeast(int64_t{1}))->capture_default_str();
  app.add_option("--tgt-len", o.tgt_len, "Longest target sentence (words); lengths cycle down by up to 4")
      ->check(tfm::AtLeast(int64_t{1}))->capture_default_str();
  app.add_option("--steps", o.steps, "Timed steps, after one warm-up step")
      ->check(tfm::AtLeast(1))->capture_default_str();
  app.add_option("--device", o.device, "cpu, or cuda[:N] when built with CUDA and a GPU is usable")
      ->capture_default_str();
  app.add_option("--out", o.out, "Write the results as TSV to this file")->capture_default_str();
  app.add_flag("--no-reference", o.no_reference, "Time tfm alone (no PyTorch, no verdict)");
  app.add_option("--python", o.python, "Interpreter with torch for the reference")
      ->capture_default_str();
  app.add_option("--script", o.script, "The PyTorch reference script")->capture_default_str();
  app.add_flag("--gemm-shapes", o.gemm_shapes,
               "Print time and GFLOP/s of every sgemm shape of a step (CPU)");
}

HostBatch make_batch(int64_t tokens, int64_t src_len, int64_t tgt_len, int64_t vocab) {
  std::vector<std::vector<int32_t>> sources, targets;
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next_id = [&] {  // ids in [4, V): 0..3 are pad, unk, bos, eos
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int32_t>(4 + (state >> 33) % static_cast<uint64_t>(vocab - 4));
  };
  int64_t target_tokens = 0;
  for (int64_t i = 0; target_tokens < tokens; ++i) {
    const int64_t s = std::max<int64_t>(1, src_len - i % 5);
    const int64_t t = std::max<int64_t>(1, tgt_len - (i + 2) % 5);
    std::vector<int32_t> src(static_cast<size_t>(s)), tgt(static_cast<size_t>(t));
    for (auto& id : src) id = next_id();
    for (auto& id : tgt) id = next_id();
    sources.push_back(std::move(src));
    targets.push_back(std::move(tgt));
    target_tokens += t + 1;
  }
  return HostBatch::from_pairs(sources, targets);
}

namespace {

// model_pytorch.py --batch's file: a line a sentence, its source, decoder
// input and decoder output ids without padding, tab-separated.
std::string batch_lines(const HostBatch& batch) {
  std::string out;
  for (int64_t b = 0; b < batch.batch; ++b) {
    auto row = [&](const std::vector<int32_t>& ids, int64_t width, int32_t length) {
      std::string s;
      for (int32_t i = 0; i < length; ++i)
        s += fmt::format("{}{}", i ? " " : "", ids[static_cast<size_t>(b * width + i)]);
      return s;
    };
    const int32_t s = batch.src_lengths[static_cast<size_t>(b)], t = batch.tgt_lengths[static_cast<size_t>(b)];
    out += row(batch.src, batch.src_len, s) + '\t' + row(batch.tgt_in, batch.tgt_len, t) + '\t' +
           row(batch.tgt_out, batch.tgt_len, t) + '\n';
  }
  return out;
}

// "key=value key=value ..." as a map.
std::map<std::string, std::string> result_fields(const std::string& text) {
  std::map<std::string, std::string> kv;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = std::min(text.find(' ', pos), text.size());
    const std::string field = text.substr(pos, end - pos);
    const size_t eq = field.find('=');
    if (eq != std::string::npos) kv[field.substr(0, eq)] = field.substr(eq + 1);
    pos = end + 1;
  }
  return kv;
}

}  // namespace

void reset_pool_peak(Device device) {
#ifdef TFM_WITH_CUDA
  if (!device.is_cuda()) return;
  activate(device);
  cudaMemPool_t pool = nullptr;
  if (cudaDeviceGetMemPool(&pool, device.index) != cudaSuccess) return;
  uint64_t zero = 0;  // cuuint64_t, as the attribute takes it
  cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero);
#else
  (void)device;
#endif
}

size_t pool_peak(Device device) {
#ifdef TFM_WITH_CUDA
  if (!device.is_cuda()) return 0;
  cudaMemPool_t pool = nullptr;
  uint64_t high = 0;
  if (cudaDeviceGetMemPool(&pool, device.index) != cudaSuccess ||
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high) != cudaSuccess)
    return 0;
  return static_cast<size_t>(high);
#else
  (void)device;
  return 0;
#endif
}

TorchResult run_torch(const TorchRun& run, const ModelConfig& config, const HostBatch& batch,
                      Device device) {
  TFM_REQUIRE(config.heads * config.d_k == config.d_model &&
                  config.heads * config.d_v == config.d_model,
              "the PyTorch reference needs heads * d_k = heads * d_v = d_model, but preset {} "
              "has {} x {} (d_v {}) against d_model {}",
              run.preset, config.heads, config.d_k, config.d_v, config.d_model);
  TFM_REQUIRE(config.share_embeddings && !config.learned_positions,
              "the PyTorch reference builds shared embeddings with sinusoidal positions only");
  TFM_REQUIRE(access(run.script.c_str(), R_OK) == 0, "cannot read the PyTorch reference {}",
              run.script);
  char dir_template[] = "/tmp/tfm-bench-train-XXXXXX";
  TFM_REQUIRE(mkdtemp(dir_template) != nullptr, "cannot make a temporary directory");
  const std::string dir = dir_template;
  io::write_file_atomic(dir + "/batch", batch_lines(batch));
  const std::string cmd = fmt::format(
      "{} {} --vocab {} --layers {} --d-model {} --d-ff {} --heads {} --dropout {} "
      "--label-smoothing {}{} --steps {} --warmup 1 --threads {} --device {} "
      "--batch {}/batch --precision {}{}{}{}",
      run.python, run.script, config.vocab_size, config.decoder_layers, config.d_model, config.d_ff,
      config.heads, config.dropout, config.label_smoothing, config.pre_norm ? " --pre-norm" : "",
      run.steps, cpu_threads(), device.is_cuda() ? fmt::format("cuda:{}", device.index) : "cpu",
      dir, run.precision, run.compile ? " --compile" : "", run.strong ? " --strong" : "",
      run.adam ? fmt::format(" --adam --warmup-steps {}", run.warmup) : "");
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) {
    std::filesystem::remove_all(dir);
    fail("cannot start {}", run.python);
  }
  TorchResult r;
  bool found = false;
  std::string no_torch;
  char line[1024];
  while (std::fgets(line, sizeof line, pipe)) {
    std::string text(line);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    if (text.rfind("NO_TORCH ", 0) == 0) no_torch = text.substr(9);
    if (text.rfind("RESULT ", 0) != 0) continue;
    const std::map<std::string, std::string> kv = result_fields(text.substr(7));
    auto get = [&](const char* key) { auto it = kv.find(key); return it == kv.end() ? std::string() : it->second; };
    try {
      r.tokens_per_s = std::stod(get("tokens_per_s"));
      r.seconds = std::stod(get("seconds"));
      r.params = std::stoll(get("params"));
      r.threads = std::stoi(get("threads"));
    } catch (const std::exception&) {
      continue;  // not the line asked for: found stays false
    }
    r.version = get("torch");
    r.peak_bytes = kv.count("peak_bytes") ? std::stoull(get("peak_bytes")) : 0;
    r.attention = get("attention");
    r.adam = get("adam");
    r.compile = get("compile");
    r.variant = get("variant");
    r.attention_impl = get("attention_impl");
    r.sdpa = get("sdpa");
    r.loss = get("loss");
    found = true;
  }
  const int status = pclose(pipe);
  std::filesystem::remove_all(dir);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == kNoTorch || !no_torch.empty())
    fail("PyTorch cannot be imported by {} ({}); --no-reference times tfm alone", run.python,
         no_torch.empty() ? "no reason given" : no_torch);
  if (code != 0 || !found || !(r.tokens_per_s > 0))
    fail("the PyTorch reference failed (exit status {}): {}", code, cmd.substr(0, 200));
  return r;
}

void GemmClock::timed(ops::cpu::CblasOrder order, ops::cpu::CblasTranspose ta,
                      ops::cpu::CblasTranspose tb, int m, int n, int k, float alpha,
                      const float* a, int lda, const float* b, int ldb, float beta, float* c,
                      int ldc) {
  const auto start = std::chrono::steady_clock::now();
  real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - start)
                         .count();
  nanoseconds += ns;
  flops += 2ll * m * n * k;
  if (shapes_on) {
    const std::lock_guard lock(mutex);
    Tally& t = shapes[{ta == ops::cpu::CblasTrans ? 'T' : 'N', tb == ops::cpu::CblasTrans ? 'T' : 'N',
                       any_m ? 0 : m, k, n}];
    ++t.calls;
    t.nanoseconds += ns;
    t.flops += 2ll * m * n * k;
  }
}

void GemmClock::reset() {
  nanoseconds = 0;
  flops = 0;
  const std::lock_guard lock(mutex);
  shapes.clear();
}

std::string GemmClock::summary(double seconds, int steps, const char* unit) {
  const double gemm_s = nanoseconds.load() * 1e-9;
  std::string out = fmt::format(
      "tfm: {:.0f}% of the {} in OpenBLAS sgemm ({:.3f} s of {:.3f} s, {:.1f} GFLOP/s)\n",
      gemm_s / seconds * 100, unit, gemm_s, seconds, gemm_s > 0 ? flops.load() / gemm_s * 1e-9 : 0.0);
  if (!shapes_on) return out;
  std::vector<std::pair<Shape, Tally>> rows(shapes.begin(), shapes.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.nanoseconds > b.second.nanoseconds; });
  out += fmt::format("\n{:>2} {:>6} {:>6} {:>6} {:>10} {:>12} {:>9}\n", "op", "M", "K", "N",
                     fmt::format("calls/{}", unit), fmt::format("ms/{}", unit), "GFLOP/s");
  for (const auto& [shape, t] : rows) {
    const auto [ta, tb, m, k, n] = shape;
    out += fmt::format("{}{} {:>6} {:>6} {:>6} {:>10.1f} {:>12.1f} {:>9.1f}\n", ta, tb,
                       any_m ? "*" : std::to_string(m), k, n, static_cast<double>(t.calls) / steps,
                       t.nanoseconds * 1e-6 / steps, t.flops / static_cast<double>(t.nanoseconds));
  }
  return out;
}

// The table is a function-local static that is not const itself, so
// writing through the const reference blas() returns is well defined.
void GemmClock::install(bool shapes, bool any_m_) {
  shapes_on = shapes;
  any_m = any_m_;
  auto& blas = const_cast<ops::cpu::Blas&>(ops::cpu::blas());
  if (blas.sgemm == &timed) return;
  real = blas.sgemm;
  blas.sgemm = &timed;
}

}  // namespace tfm::bench
