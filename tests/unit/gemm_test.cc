// CPU GEMM family against a float64 reference, in f32 and f64, on odd
// shapes: every transpose combination, batches with shared operands, the
// bias and ReLU epilogue, alpha, and beta = 1 accumulation.
#include <catch2/catch.hpp>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

namespace {

struct Case {
  const char* name;
  int64_t g, m, n, k;   // g = 0: plain matrices, no batch dimension
  bool shared_a = false, shared_b = false;
};

Shape mat(int64_t g, int64_t r, int64_t c, bool shared) {
  return g == 0 || shared ? Shape{r, c} : Shape{g, r, c};
}

void run_case(const Case& cs, DType dtype, bool ta, bool tb, bool with_bias, bool relu, float alpha,
              float beta, uint64_t seed) {
  Stream cpu(Device::cpu());
  Tensor a = test::random(ta ? mat(cs.g, cs.k, cs.m, cs.shared_a) : mat(cs.g, cs.m, cs.k, cs.shared_a),
                          dtype, seed);
  Tensor b = test::random(tb ? mat(cs.g, cs.n, cs.k, cs.shared_b) : mat(cs.g, cs.k, cs.n, cs.shared_b),
                          dtype, seed + 1);
  Tensor c = test::random(mat(cs.g, cs.m, cs.n, false), dtype, seed + 2);
  Tensor bias = with_bias ? test::random({cs.n}, dtype, seed + 3) : Tensor();
  const std::vector<double> ref =
      test::gemm_reference(a, b, c, ta, tb, alpha, beta, bias.view(), relu);
  ops::GemmOptions o;
  o.trans_a = ta;
  o.trans_b = tb;
  o.alpha = alpha;
  o.beta = beta;
  o.relu = relu;
  ops::gemm(a, b, c, o, cpu, bias.view());
  INFO(cs.name << " " << dtype_name(dtype) << " ta=" << ta << " tb=" << tb << " bias=" << with_bias
               << " relu=" << relu << " alpha=" << alpha << " beta=" << beta);
  test::require_close({{"C", c, ref, test::tolerance_for(dtype, cs.k)}});
}

const Case kCases[] = {
    {"1x1x1", 0, 1, 1, 1},
    {"7x5x3", 0, 7, 5, 3},
    {"33x17x65", 0, 33, 17, 65},
    {"batched 3x(9x11x13)", 3, 9, 11, 13},
    {"batched, shared A", 4, 6, 7, 5, true, false},
    {"batched, shared B (a weight)", 5, 8, 3, 10, false, true},
};

}  // namespace

TEST_CASE("gemm matches float64 for every transpose, shape and epilogue", "[gemm]") {
  uint64_t seed = 100;
  for (DType dtype : {DType::f32, DType::f64})
    for (const Case& cs : kCases)
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          run_case(cs, dtype, ta, tb, false, false, 1.0f, 0.0f, seed += 10);
          run_case(cs, dtype, ta, tb, true, false, 1.0f, 0.0f, seed += 10);
          run_case(cs, dtype, ta, tb, true, true, 0.5f, 0.0f, seed += 10);
          run_case(cs, dtype, ta, tb, false, true, 1.0f, 1.0f, seed += 10);
          run_case(cs, dtype, ta, tb, true, false, -0.25f, 1.0f, seed += 10);
        }
}

TEST_CASE("gemm with beta = 1 accumulates, with beta = 0 ignores C", "[gemm]") {
  Stream cpu(Device::cpu());
  Tensor a = test::random({4, 6}, DType::f32, 1);
  Tensor b = test::random({6, 3}, DType::f32, 2);
  Tensor c(Shape{4, 3}, DType::f32);
  for (int i = 0; i < 12; ++i) c.data_as<float>()[i] = NAN;  // garbage C must not leak in
  ops::gemm(a, b, c, {}, cpu);
  const std::vector<double> once = test::to_f64(c);
  for (double v : once) REQUIRE(std::isfinite(v));
  ops::GemmOptions acc;
  acc.beta = 1.0f;
  ops::gemm(a, b, c, acc, cpu);
  std::vector<double> twice = once;
  for (double& v : twice) v *= 2;
  test::require_close({{"C after two accumulations", c, twice, test::tolerance_for(DType::f32, 6)}});
}

TEST_CASE("gemm rejects what it cannot compute with one clear sentence", "[gemm]") {
  Stream cpu(Device::cpu());
  Tensor a({4, 6}, DType::f32), b({5, 3}, DType::f32), c({4, 3}, DType::f32);
  REQUIRE_THROWS_WITH(ops::gemm(a, b, c, {}, cpu),
                      Catch::Contains("op(A) is 4 x 6 but op(B) is 5 x 3"));
  Tensor b2({6, 3}, DType::f32), c_wrong({4, 4}, DType::f32);
  REQUIRE_THROWS_WITH(ops::gemm(a, b2, c_wrong, {}, cpu),
                      Catch::Contains("C is (4, 4) but op(A) op(B) is 4 x 3"));
  Tensor bias({4}, DType::f32);
  REQUIRE_THROWS_WITH(ops::gemm(a, b2, c, {}, cpu, bias),
                      Catch::Contains("bias is (4) but C has 3 columns"));
  Tensor a16({4, 6}, DType::bf16), b16({6, 3}, DType::bf16), c16({4, 3}, DType::bf16);
  REQUIRE_THROWS_WITH(ops::gemm(a16, b16, c16, {}, cpu), Catch::Contains("bf16"));
  Tensor a64({4, 6}, DType::f64);
  REQUIRE_THROWS_WITH(ops::gemm(a64, b2, c, {}, cpu), Catch::Contains("A is f64 but B is f32"));
  Tensor batched_a({2, 4, 6}, DType::f32), batched_c({3, 4, 3}, DType::f32);
  REQUIRE_THROWS_WITH(ops::gemm(batched_a, b2, batched_c, {}, cpu),
                      Catch::Contains("A holds 2 matrices but C holds 3"));
  // A tensor that claims to live on a GPU never reaches a CPU kernel.
  TensorView on_gpu(a.view().data(), DType::f32, {4, 6}, Device::cuda(0));
  REQUIRE_THROWS_WITH(ops::gemm(on_gpu, b2, c, {}, cpu),
                      Catch::Contains("A is on cuda:0 but the stream runs on cpu"));
}
