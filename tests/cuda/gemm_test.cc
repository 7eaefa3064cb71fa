// CUDA GEMM against the CPU GEMM: every dtype and math mode, every transpose,
// batches with shared operands, the fused epilogues, accumulation, and
// operands whose alignment forces the non-cuBLASLt path. Inputs are drawn in
// the dtype under test and handed to the CPU in f64, so both sides multiply
// the same numbers; only the device's rounding differs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

namespace {

struct Mode {
  const char* name;
  DType ab, c;
  bool tf32;
  test::Tolerance tol;  // for K = 64-ish sums of O(1) terms in this mode
};

// tf32 multiplies with a 10-bit mantissa; bf16/f16 results are rounded to
// their storage.
const Mode kModes[] = {
    {"f32", DType::f32, DType::f32, false, test::tolerance_for(DType::f32, 64)},
    {"tf32", DType::f32, DType::f32, true, {1e-2, 5e-3}},
    {"bf16", DType::bf16, DType::bf16, false, test::tolerance_for(DType::bf16, 64)},
    {"f16", DType::f16, DType::f16, false, test::tolerance_for(DType::f16, 64)},
    {"bf16 -> f32", DType::bf16, DType::f32, false, {1e-4, 1e-5}},
    {"f16 -> f32", DType::f16, DType::f32, false, {1e-4, 1e-5}},
};

struct Problem {
  const char* name;
  int64_t g, m, n, k;  // g = 0: plain matrices
  bool shared_a = false, shared_b = false;
};

const Problem kProblems[] = {
    {"7x5x3", 0, 7, 5, 3},
    {"64x48x80", 0, 64, 48, 80},
    {"33x17x65", 0, 33, 17, 65},
    {"batched 6x(16x24x32)", 6, 16, 24, 32},
    {"batched, shared B", 4, 9, 8, 16, false, true},
    {"batched, shared A", 3, 8, 10, 24, true, false},
};

Shape mat(int64_t g, int64_t r, int64_t c, bool shared) {
  return g == 0 || shared ? Shape{r, c} : Shape{g, r, c};
}

// Draws in `dtype` on the CPU, returns (device copy, f64 CPU copy).
std::pair<Tensor, Tensor> operand(Shape shape, DType dtype, uint64_t seed, Device gpu) {
  Tensor host = test::random(shape, dtype, seed);
  return {test::to_device(host, gpu), test::cast(host, DType::f64)};
}

}  // namespace

TEST_CASE("cuda gemm matches cpu gemm", "[gemm]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 1000;
  for (const Mode& mode : kModes)
    for (const Problem& p : kProblems)
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (int epilogue = 0; epilogue < 4; ++epilogue) {
            const bool bias_on = epilogue & 1, relu = epilogue & 2;
            const float beta = epilogue == 3 ? 1.0f : 0.0f;
            auto [a, a64] = operand(ta ? mat(p.g, p.k, p.m, p.shared_a) : mat(p.g, p.m, p.k, p.shared_a),
                                    mode.ab, seed += 10, gpu);
            auto [b, b64] = operand(tb ? mat(p.g, p.n, p.k, p.shared_b) : mat(p.g, p.k, p.n, p.shared_b),
                                    mode.ab, seed + 1, gpu);
            auto [c, c64] = operand(mat(p.g, p.m, p.n, false), mode.c, seed + 2, gpu);
            Tensor bias, bias64;
            if (bias_on) std::tie(bias, bias64) = operand({p.n}, mode.c, seed + 3, gpu);
            ops::GemmOptions o;
            o.trans_a = ta;
            o.trans_b = tb;
            o.alpha = 0.75f;
            o.beta = beta;
            o.relu = relu;
            o.tf32 = mode.tf32;
            ops::gemm(a, b, c, o, cuda, bias.view());
            ops::gemm(a64, b64, c64, o, cpu, bias64.view());
            cuda.synchronize();
            INFO(mode.name << " " << p.name << " ta=" << ta << " tb=" << tb << " bias=" << bias_on
                           << " relu=" << relu << " beta=" << beta);
            test::require_close({{"C", c, test::to_f64(c64), mode.tol}});
          }
}

TEST_CASE("cuda gemm is right for operands aligned to 2 bytes only", "[gemm]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  // Views that start one element into their allocation: 2-byte aligned
  // f16, which many cuBLASLt kernels refuse (then the fallback path runs).
  const int64_t m = 13, n = 11, k = 9;
  Tensor a_host = test::random({m * k + 1}, DType::f16, 1), b_host = test::random({k * n + 1}, DType::f16, 2);
  Tensor a = test::to_device(a_host, gpu), b = test::to_device(b_host, gpu);
  Tensor c({m * n + 1}, DType::f16, gpu), bias = test::to_device(test::random({n}, DType::f16, 3), gpu);
  auto shifted = [](const Tensor& t, Shape s) {
    return TensorView(static_cast<char*>(t.view().data()) + 2, t.dtype(), s, t.device());
  };
  ops::GemmOptions o;
  o.relu = true;
  ops::gemm(shifted(a, {m, k}), shifted(b, {k, n}), shifted(c, {m, n}), o, cuda, bias);
  cuda.synchronize();
  Tensor a64 = test::cast(shifted(a, {m, k}), DType::f64), b64 = test::cast(shifted(b, {k, n}), DType::f64);
  Tensor c64({m, n}, DType::f64), bias64 = test::cast(bias, DType::f64);
  ops::gemm(a64, b64, c64, o, cpu, bias64);
  test::require_close({{"C", shifted(c, {m, n}), test::to_f64(c64), test::tolerance_for(DType::f16, k)}});
}

TEST_CASE("cuda gemm reports tensors on the wrong device", "[gemm]") {
  Stream cuda(Device::cuda(0));
  Tensor a({4, 6}, DType::f32), b({6, 3}, DType::f32), c({4, 3}, DType::f32);
  REQUIRE_THROWS_WITH(ops::gemm(a, b, c, {}, cuda), Catch::Contains("A is on cpu but the stream runs on cuda:0"));
  Tensor a_gpu({4, 6}, DType::f64, Device::cuda(0));
  Tensor b_gpu({6, 3}, DType::f64, Device::cuda(0)), c_gpu({4, 3}, DType::f64, Device::cuda(0));
  REQUIRE_THROWS_WITH(ops::gemm(a_gpu, b_gpu, c_gpu, {}, cuda), Catch::Contains("f64"));
}

TEST_CASE("cuda gemm is right for batches whose matrix pitch breaks the alignment", "[gemm]") {
  // Attention's batched products have matrix pitches such as tq * tk: odd
  // ones leave every second matrix of a 16-bit batch 2-byte aligned, though
  // the base pointers are 256-byte aligned. cuBLASLt must be told (or the
  // fallback must run), for every operand.
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 3000;
  struct Odd { int64_t g, m, n, k; };
  for (const Mode& mode : kModes)
    for (const Odd& p : {Odd{4, 5, 7, 9}, Odd{3, 7, 13, 5}, Odd{16, 9, 11, 64}, Odd{5, 33, 31, 3}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          auto [a, a64] = operand(ta ? Shape{p.g, p.k, p.m} : Shape{p.g, p.m, p.k}, mode.ab, seed += 10, gpu);
          auto [b, b64] = operand(tb ? Shape{p.g, p.n, p.k} : Shape{p.g, p.k, p.n}, mode.ab, seed + 1, gpu);
          auto [c, c64] = operand({p.g, p.m, p.n}, mode.c, seed + 2, gpu);
          ops::GemmOptions o;
          o.trans_a = ta;
          o.trans_b = tb;
          o.beta = 1.0f;
          o.tf32 = mode.tf32;
          ops::gemm(a, b, c, o, cuda);
          ops::gemm(a64, b64, c64, o, cpu);
          cuda.synchronize();
          INFO(mode.name << " " << p.g << "x(" << p.m << "x" << p.n << "x" << p.k << ") ta=" << ta << " tb=" << tb);
          test::require_close({{"C", c, test::to_f64(c64), mode.tol}});
        }
}

TEST_CASE("cuda gemm adds a bias under 16 bytes aligned", "[gemm]") {
  // cuBLASLt's bias epilogue reads the bias with vector loads: a bias view
  // one element into its buffer must take the unfused path, and be right.
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 3500;
  for (const Mode& mode : kModes) {
    const int64_t m = 24, n = 40, k = 32;
    auto [a, a64] = operand({m, k}, mode.ab, seed += 10, gpu);
    auto [b, b64] = operand({k, n}, mode.ab, seed + 1, gpu);
    auto [bias_buf, bias_buf64] = operand({n + 1}, mode.c, seed + 2, gpu);
    const TensorView bias(static_cast<char*>(bias_buf.view().data()) + dtype_size(mode.c), mode.c, {n}, gpu);
    Tensor bias64({n}, DType::f64);
    std::copy_n(bias_buf64.data_as<double>() + 1, n, bias64.data_as<double>());
    for (bool relu : {false, true}) {
      Tensor c({m, n}, mode.c, gpu), c64({m, n}, DType::f64);
      ops::GemmOptions o;
      o.relu = relu;
      o.tf32 = mode.tf32;
      ops::gemm(a, b, c, o, cuda, bias);
      ops::gemm(a64, b64, c64, o, cpu, bias64);
      cuda.synchronize();
      INFO(mode.name << " relu=" << relu);
      test::require_close({{"C", c, test::to_f64(c64), mode.tol}});
    }
  }
}

TEST_CASE("cuda gemm is right at the output layer's sizes (K = 25,000, N = 37,000)", "[gemm][large]") {
  // The sizes of the training step's output layer at the paper's batch:
  // the embedding gradient sums over K = 25,000 target rows into N = 37,000
  // vocabulary rows. Operands hold small multiples of 1/8 and 1/64, exact in
  // bf16, so every product and every partial sum (|sum| < 2^14, steps of
  // 2^-9) is exact in f32: whatever the order of the sums, the result is
  // the exact value (allowed: a quarter of one step). Checked on a sample
  // of columns, in f64 on the host.
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu);
  const int64_t m = 8, k = 25000, n = 37000;
  const auto a_at = [](int64_t i, int64_t j) { return static_cast<double>((i * 31 + j * 17) % 13 - 6) / 8; };
  const auto b_at = [](int64_t i, int64_t j) { return static_cast<double>((i * 131 + j * 71) % 97 - 48) / 64; };
  for (DType ab : {DType::bf16, DType::f32}) {
    Tensor a_host({m, k}, ab), b_host({k, n}, ab);
    const auto fill = [](Tensor& t, auto at) {
      const int64_t rows = t.shape()[0], cols = t.shape()[1];
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          const float v = static_cast<float>(at(i, j));
          if (t.dtype() == DType::bf16) t.data_as<bf16>()[i * cols + j] = bf16(v);
          else t.data_as<float>()[i * cols + j] = v;
        }
    };
    fill(a_host, a_at);
    fill(b_host, b_at);
    const Tensor a = test::to_device(a_host, gpu), b = test::to_device(b_host, gpu);
    Tensor c({m, n}, DType::f32, gpu);
    ops::gemm(a, b, c, {}, cuda);
    const std::vector<double> got = test::to_f64(c);
    for (int64_t j = 0; j < n; j += 997)
      for (int64_t i = 0; i < m; ++i) {
        double want = 0;
        for (int64_t l = 0; l < k; ++l) want += a_at(i, l) * b_at(l, j);
        INFO(dtype_name(ab) << " C[" << i << ", " << j << "]");
        REQUIRE(std::abs(got[static_cast<size_t>(i * n + j)] - want) <= 1.0 / 2048);
      }
  }
}
