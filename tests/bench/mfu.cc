#include "tests/bench/mfu.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "libcore/base/log.h"
#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"

namespace tfm::bench {

TrainingFlops training_flops(const ModelConfig& c, const HostBatch& batch) {
  const double d = static_cast<double>(c.d_model), dff = static_cast<double>(c.d_ff);
  const double qk = static_cast<double>(c.heads * c.d_k), v = static_cast<double>(c.heads * c.d_v);
  const double le = static_cast<double>(c.encoder_layers), ld = static_cast<double>(c.decoder_layers);
  double S = 0, T = 0, ss = 0, tt = 0, ts = 0;  // tokens, and sums of s^2, t^2, t s over sentences
  for (int64_t b = 0; b < batch.batch; ++b) {
    const double s = batch.src_lengths[static_cast<size_t>(b)], t = batch.tgt_lengths[static_cast<size_t>(b)];
    S += s, T += t, ss += s * s, tt += t * t, ts += t * s;
  }
  TrainingFlops f;
  f.terms = {
      {"encoder projections", le * 2 * S * d * (2 * qk + 2 * v)},
      {"encoder feed-forward", le * 4 * S * d * dff},
      {"encoder attention (scores, context)", le * 2 * ss * (qk + v)},
      {"decoder self-attention projections", ld * 2 * T * d * (2 * qk + 2 * v)},
      {"decoder cross-attention projections", ld * (2 * T * d * (qk + v) + 2 * S * d * (qk + v))},
      {"decoder feed-forward", ld * 4 * T * d * dff},
      {"decoder self-attention (scores, context)", ld * 2 * tt * (qk + v)},
      {"decoder cross-attention (scores, context)", ld * 2 * ts * (qk + v)},
      {"output layer", 2 * T * d * static_cast<double>(c.vocab_size)},
  };
  for (const FlopTerm& t : f.terms) f.forward += t.forward;
  f.step = 3 * f.forward;
  return f;
}

std::string TrainingFlops::describe() const {
  std::string out = fmt::format("a step's matrix FLOPs (forward x 3: backward = 2 x forward):\n");
  for (const FlopTerm& t : terms)
    out += fmt::format("  {:<42} {:9.3f} TFLOP {:6.1f}%\n", t.name, 3 * t.forward / 1e12, 100 * t.forward / forward);
  out += fmt::format("  {:<42} {:9.3f} TFLOP\n", "step", step / 1e12);
  return out;
}

double spec_peak_tflops(Device device, Precision precision, std::string* card) {
  card->clear();
  if (!device.is_cuda()) return 0;
  for (const CudaDeviceInfo& info : cuda_status().devices)
    if (info.index == device.index) *card = info.name;
  if (precision != Precision::bf16 && precision != Precision::fp16) return 0;
  auto has = [&](const char* s) { return card->find(s) != std::string::npos; };
  // Dense tensor-core peaks of the data sheets, bf16 = fp16.
  if (has("H200")) return 989.4;
  if (has("H100") && has("NVL")) return 835.5;
  if (has("H100") && has("PCIe")) return 756.5;
  if (has("H100")) return 989.4;  // SXM
  if (has("A100")) return 312.0;
  return 0;
}

double measured_gemm_peak_tflops(Device device, int repeats, std::string* detail) {
  detail->clear();
  if (!device.is_cuda()) return 0;
  Stream stream(device);
  double best = 0;
  for (const int64_t n : {4096, 8192, 16384}) {
    // Uniform values in [-1, 1) from a 64-bit LCG: random bits toggle as
    // many transistors as real activations do (zeros run faster).
    Tensor host({n, n}, DType::f32);
    uint64_t state = 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(n);
    float* h = host.data_as<float>();
    for (int64_t i = 0; i < n * n; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      h[i] = static_cast<float>(static_cast<int64_t>(state >> 40) - (int64_t{1} << 23)) / float(1 << 23);
    }
    Tensor staged({n, n}, DType::f32, device), a({n, n}, DType::bf16, device), b({n, n}, DType::bf16, device),
        c({n, n}, DType::bf16, device);
    copy(staged, host, stream);
    ops::cast(staged, a, stream);
    ops::cast(staged, b, stream);
    ops::GemmOptions transposed;  // C = A B^T with B = A: the NT layout the weight GEMMs use
    transposed.trans_b = true;
    // Enough products a round for about 20 ms at 800 TFLOP/s.
    const double flop = 2.0 * n * n * n;
    const int calls = std::max(1, static_cast<int>(20e-3 * 800e12 / flop));
    for (int i = 0; i < 3; ++i) ops::gemm(a, b, c, transposed, stream);
    stream.synchronize();
    std::vector<double> rates;
    for (int r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) ops::gemm(a, b, c, transposed, stream);
      stream.synchronize();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      rates.push_back(flop * calls / s / 1e12);
    }
    std::sort(rates.begin(), rates.end());
    const double rate = rates[rates.size() / 2];
    *detail += fmt::format("{}{}^3 {:.1f}", detail->empty() ? "" : ", ", n, rate);
    best = std::max(best, rate);
  }
  return best;
}

}  // namespace tfm::bench
