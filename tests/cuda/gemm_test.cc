// CUDA GEMM against the CPU GEMM: every dtype and math mode, every transpose,
// batches with shared operands, the fused epilogues, accumulation, and
// operands whose alignment forces the non-cuBLASLt path. Inputs are drawn in
// the dtype under test and handed to the CPU in f64, so both sides multiply
// the same numbers; only the device's rounding differs.
#include <catch2/catch.hpp>

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
