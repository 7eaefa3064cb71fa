// What tests/bench/model and tests/bench/train share: the batch they time,
// the PyTorch reference (model_pytorch.py) run as a child on a batch of the
// same shape, and a clock on OpenBLAS sgemm.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "kernels/cpu/blas.h"
#include "libcore/app/app.h"
#include "libcore/base/device.h"
#include "libcore/model/batch.h"
#include "libcore/model/config.h"

#ifndef TFM_BENCH_SOURCE_DIR
#define TFM_BENCH_SOURCE_DIR "tests/bench"
#endif

namespace tfm::bench {

// Exit status when tfm falls under the target ratio (1 is an error).
inline constexpr int kSlow = 3;
// tfm tokens/s over PyTorch tokens/s that counts as ok.
inline constexpr double kTargetRatio = 2.0;

// The options both benchmarks take (and -q, -v, --version).
struct BenchOptions {
  CommonOptions common;
  std::string preset = "base";
  int64_t tokens = 4000;
  int64_t src_len = 25;
  int64_t tgt_len = 25;
  int steps = 5;
  std::string device = "cpu";
  std::string out;          // the TSV file
  bool no_reference = false;
  std::string python = "/usr/bin/python3";
  std::string script = TFM_BENCH_SOURCE_DIR "/model_pytorch.py";
  bool gemm_shapes = false;  // print the time of every sgemm shape
};
void add_bench_options(CLI::App& app, BenchOptions& o);

// Sentence lengths cycle from the given length down by up to 4 words, so
// the batch has padding on both sides; sentences are added until the
// target side (words + eos) holds `tokens` tokens. Ids in [4, vocab).
HostBatch make_batch(int64_t tokens, int64_t src_len, int64_t tgt_len, int64_t vocab);

// model_pytorch.py's exit status when torch cannot be imported.
inline constexpr int kNoTorch = 4;

struct TorchRun {
  std::string python = "/usr/bin/python3";  // Debian's, with python3-torch
  std::string script;                       // model_pytorch.py
  std::string preset;                       // for messages
  int steps = 5;
  bool adam = false;                        // a whole training step (--adam)
  int64_t warmup = 4000;                    // of the schedule, with adam
  std::string precision = "fp32";           // fp32, or bf16 / fp16 autocast (CUDA)
  bool compile = false;                     // torch.compile, where torch has it
  bool strong = false;                      // model_pytorch.py --strong: the whole step compiled,
                                            // packed rows, tfm's exact architecture
};

struct TorchResult {
  double tokens_per_s = 0;
  double seconds = 0;
  long long params = 0;
  int threads = 0;
  std::string version;
  size_t peak_bytes = 0;  // the caching allocator's peak reserved (CUDA), else 0
  std::string attention, adam, compile;  // how it ran (model_pytorch.py's RESULT line)
  std::string variant, attention_impl, sdpa, loss;  // likewise, where the script says (--strong)
};

// Runs the reference on the same batch: `batch`'s ids, written to a
// temporary file the script reads (--batch). Throws Error when torch cannot
// be imported or the script fails.
TorchResult run_torch(const TorchRun& run, const ModelConfig& config, const HostBatch& batch,
                      Device device);

// Peak device memory of the stream-ordered allocator (cudaMallocAsync, the
// scratch of every op): the high-water mark of bytes its pool reserved since
// reset_pool_peak. 0 on the CPU or without CUDA compiled in.
void reset_pool_peak(Device device);
size_t pool_peak(Device device);

// Time spent inside OpenBLAS sgemm, by swapping a timing wrapper into the
// process's one Blas table (kernels/cpu/blas.h). Every CPU GEMM of the model
// goes through it, so the share is measured, not estimated; a
// steady_clock read costs tens of nanoseconds against calls of microseconds
// and more. Not available on CUDA (kernels run asynchronously).
// With shapes on, it also keeps calls and time per (transposes, M, K, N).
struct GemmClock {
  using Shape = std::tuple<char, char, int, int, int>;  // ta, tb, M, K, N
  struct Tally {
    int64_t calls = 0, nanoseconds = 0, flops = 0;
  };
  static inline ops::cpu::Blas::Sgemm real = nullptr;
  static inline std::atomic<int64_t> nanoseconds{0};
  static inline std::atomic<int64_t> flops{0};
  static inline bool shapes_on = false;
  static inline bool any_m = false;  // shapes keyed by (transposes, K, N) alone, M shown as *
  static inline std::mutex mutex;
  static inline std::map<Shape, Tally> shapes;

  static void reset();
  // "tfm: P% of the step in OpenBLAS sgemm (S s of T s, G GFLOP/s)" and,
  // with shapes on, a table of the shapes, slowest first, per `unit` (the
  // time is that of `steps` of them).
  static std::string summary(double seconds, int steps, const char* unit = "step");

  static void timed(ops::cpu::CblasOrder order, ops::cpu::CblasTranspose ta,
                    ops::cpu::CblasTranspose tb, int m, int n, int k, float alpha,
                    const float* a, int lda, const float* b, int ldb, float beta, float* c,
                    int ldc);
  static void install(bool shapes, bool any_m = false);
};

}  // namespace tfm::bench
