// CPU reductions (sum_rows, sum_squares) and scale against float64 in f32
// and f64, their determinism, and bad shapes and dtypes.
#include <catch2/catch.hpp>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

TEST_CASE("sum_rows accumulates column sums like float64", "[reduce]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 900;
  const std::pair<int64_t, int64_t> sizes[] = {{7, 13}, {1, 1}, {300, 129}};  // (R, N)
  for (DType dtype : {DType::f32, DType::f64})
    for (auto [rows, n] : sizes) {
      Tensor x = test::random({rows, n}, dtype, ++seed), out = test::random({n}, dtype, ++seed);
      std::vector<double> ref = test::to_f64(out);
      const std::vector<double> xv = test::to_f64(x);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j) ref[static_cast<size_t>(j)] += xv[static_cast<size_t>(r * n + j)];
      ops::sum_rows(x, out, cpu);
      INFO(dtype_name(dtype) << " R=" << rows << " N=" << n);
      test::require_close({{"out (+=)", out, ref, test::tolerance_for(dtype, rows)}});
    }
  // (B, T, N) sums over B * T rows.
  Tensor x3 = test::random({3, 5, 7}, DType::f64, 1), out3 = Tensor::zeros({7}, DType::f64);
  Tensor out2 = Tensor::zeros({7}, DType::f64);
  ops::sum_rows(x3, out3, cpu);
  ops::sum_rows(x3.view().reshape({15, 7}), out2, cpu);
  CHECK(test::to_f64(out3) == test::to_f64(out2));
}

TEST_CASE("sum_squares and scale match float64 and repeat exactly", "[reduce]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 950;
  const Shape shapes[] = {{1}, {7, 13}, {3, 5, 11}, {37, 1031}};
  for (DType dtype : {DType::f32, DType::f64})
    for (const Shape& shape : shapes) {
      Tensor x = test::random(shape, dtype, ++seed), out = test::random({1}, dtype, ++seed);
      std::vector<double> xv = test::to_f64(x);
      double ss = 0;
      for (double v : xv) ss += v * v;
      ops::sum_squares(x, out, cpu);
      const double first = test::to_f64(out)[0];
      ops::sum_squares(x, out, cpu);  // written, not accumulated; same bits
      CHECK(test::to_f64(out)[0] == first);
      for (double& v : xv) v *= static_cast<double>(-0.75f);
      ops::scale(x, -0.75f, cpu);
      INFO(dtype_name(dtype) << " " << shape.str());
      test::require_close({{"sum of squares", out, {ss}, test::tolerance_for(dtype, x.numel())},
                           {"scaled x", x, xv, test::tolerance_for(dtype)}});
    }
}

TEST_CASE("reductions reject bad shapes and dtypes", "[reduce]") {
  Stream cpu(Device::cpu());
  Tensor x({4, 6}, DType::f32), out5({5}, DType::f32), out64({1}, DType::f64), out2({2}, DType::f32);
  REQUIRE_THROWS_WITH(ops::sum_rows(x, out5, cpu),
                      Catch::Contains("sum_rows: out is f32 (5) on cpu but must be (6)"));
  Tensor out6_64({6}, DType::f64);
  REQUIRE_THROWS_WITH(ops::sum_rows(x, out6_64, cpu), Catch::Contains("sum_rows: out is f64 but x is f32"));
  REQUIRE_THROWS_WITH(ops::sum_squares(x, out64, cpu),
                      Catch::Contains("sum_squares: out is f64 but must be f32 for f32 x"));
  REQUIRE_THROWS_WITH(ops::sum_squares(x, out2, cpu), Catch::Contains("sum_squares: out is f32 (2)"));
  Tensor ids({3}, DType::i32);
  REQUIRE_THROWS_WITH(ops::scale(ids, 2.0f, cpu), Catch::Contains("scale: x is i32"));
}
