// CPU dropout against its definition (libcore/base/rng.h), its mask properties
// (determinism, rate, forward/backward agreement, p = 0), the pre-norm
// residual add, finite differences in double, and bad arguments.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

namespace {

const Shape kShapes[] = {{7, 13}, {3, 5, 11}, {37, 1031}};  // the last runs in parallel

// y_ref = x * keep / (1 - p), the factor rounded to float as the op does.
std::vector<double> dropout_reference(const std::vector<double>& x, float p, const RngKey& key) {
  const double inv = static_cast<float>(1.0f / (1.0f - p));
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = uniform01(philox_bits(key, i)) >= p ? x[i] * inv : 0.0;
  return y;
}

}  // namespace

TEST_CASE("dropout forward and backward match their definition", "[dropout]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 500;
  const RngKey key{1234, 7, 3};
  for (DType dtype : {DType::f32, DType::f64})
    for (const Shape& shape : kShapes)
      for (float p : {0.0f, 0.1f, 0.5f}) {
        Tensor x = test::random(shape, dtype, ++seed), dy = test::random(shape, dtype, ++seed);
        Tensor y(shape, dtype), dx(shape, dtype);
        const std::vector<double> y_ref = dropout_reference(test::to_f64(x), p, key);
        const std::vector<double> dx_ref = dropout_reference(test::to_f64(dy), p, key);
        ops::dropout_forward(x, p, key, y, cpu);
        ops::dropout_backward(dy, p, key, dx, cpu);
        INFO(dtype_name(dtype) << " " << shape.str() << " p=" << p);
        const test::Tolerance tol = test::tolerance_for(dtype);
        test::require_close({{"y", y, y_ref, tol}, {"dx", dx, dx_ref, tol}});
        ops::dropout_forward(x, p, key, x, cpu);  // y may be x
        ops::dropout_backward(dy, p, key, dy, cpu);
        test::require_close({{"y (in place)", x, y_ref, tol}, {"dx (in place)", dy, dx_ref, tol}});
      }
}

TEST_CASE("dropout masks are deterministic, agree forward and backward, and drop about p", "[dropout]") {
  Stream cpu(Device::cpu());
  const Shape shape{37, 1031};
  const float p = 0.3f;
  const RngKey key{99, 2, 41};
  Tensor x = test::random(shape, DType::f32, 3, 0.5f, 1.5f);  // never 0, so 0 marks a drop
  Tensor a(shape, DType::f32), b(shape, DType::f32), c(shape, DType::f32), d(shape, DType::f32);
  ops::dropout_forward(x, p, key, a, cpu);
  ops::dropout_forward(x, p, key, b, cpu);
  ops::dropout_backward(x, p, key, c, cpu);
  ops::dropout_forward(x, p, RngKey{99, 2, 42}, d, cpu);  // the next step
  const std::vector<double> av = test::to_f64(a), bv = test::to_f64(b), cv = test::to_f64(c);
  const std::vector<double> dv = test::to_f64(d);
  int64_t dropped = 0, differs = 0, repeat_mismatch = 0, backward_mismatch = 0;
  for (size_t i = 0; i < av.size(); ++i) {
    repeat_mismatch += av[i] != bv[i];    // same key, same mask and values, bit for bit
    backward_mismatch += av[i] != cv[i];  // backward recomputes the forward's mask
    dropped += av[i] == 0.0;
    differs += (av[i] == 0.0) != (dv[i] == 0.0);
  }
  CHECK(repeat_mismatch == 0);
  CHECK(backward_mismatch == 0);
  const double rate = static_cast<double>(dropped) / static_cast<double>(av.size());
  INFO("drop rate " << rate);
  CHECK(std::abs(rate - p) < 0.01);  // about 4 standard deviations at n = 38147
  CHECK(differs > static_cast<int64_t>(av.size()) / 4);  // another step, another mask

  // p = 0 copies exactly.
  ops::dropout_forward(x, 0.0f, key, a, cpu);
  CHECK(test::to_f64(a) == test::to_f64(x));
}

TEST_CASE("add_dropout_forward adds the dropped sub-layer output to the residual", "[dropout]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 600;
  const RngKey key{8, 8, 8};
  for (DType dtype : {DType::f32, DType::f64})
    for (float p : {0.0f, 0.2f}) {
      const Shape shape{5, 17};
      Tensor res = test::random(shape, dtype, ++seed), s = test::random(shape, dtype, ++seed);
      Tensor y(shape, dtype);
      std::vector<double> ref = dropout_reference(test::to_f64(s), p, key);
      const std::vector<double> rv = test::to_f64(res);
      for (size_t i = 0; i < ref.size(); ++i) ref[i] += rv[i];
      ops::add_dropout_forward(res, s, p, key, y, cpu);
      ops::add_dropout_forward(res, s, p, key, res, cpu);  // y may be the residual
      INFO(dtype_name(dtype) << " p=" << p);
      test::require_close({{"y", y, ref, test::tolerance_for(dtype)},
                           {"y (over residual)", res, ref, test::tolerance_for(dtype)}});
    }
}

TEST_CASE("dropout backward equals finite differences in double", "[dropout]") {
  Stream cpu(Device::cpu());
  const Shape shape{6, 7};
  const float p = 0.4f;
  const RngKey key{3, 1, 4};
  Tensor x = test::random(shape, DType::f64, 31), w = test::random(shape, DType::f64, 32);
  Tensor y(shape, DType::f64), dx(shape, DType::f64);
  ops::dropout_backward(w, p, key, dx, cpu);
  auto loss = [&] {
    ops::dropout_forward(x, p, key, y, cpu);
    return test::weighted_sum(w, y);
  };
  std::vector<double> numeric = test::finite_difference(x, loss);
  test::require_close({{"dx vs finite differences", dx, numeric, {1e-8, 1e-7}}});
}

TEST_CASE("dropout rejects a bad probability or mismatched tensors", "[dropout]") {
  Stream cpu(Device::cpu());
  Tensor x({3, 4}, DType::f32), y({3, 4}, DType::f32), z({4, 3}, DType::f32);
  REQUIRE_THROWS_WITH(ops::dropout_forward(x, 1.0f, {}, y, cpu),
                      Catch::Contains("dropout_forward: dropout probability p = 1 is outside [0, 1)"));
  REQUIRE_THROWS_WITH(ops::dropout_backward(x, -0.1f, {}, y, cpu),
                      Catch::Contains("dropout_backward: dropout probability p = -0.1"));
  REQUIRE_THROWS_WITH(ops::dropout_forward(x, NAN, {}, y, cpu), Catch::Contains("outside [0, 1)"));
  REQUIRE_THROWS_WITH(ops::dropout_forward(x, 0.1f, {}, z, cpu),
                      Catch::Contains("dropout_forward: x is f32 (3, 4) on cpu but y is f32 (4, 3) on cpu"));
  REQUIRE_THROWS_WITH(ops::add_dropout_forward(x, z, 0.1f, {}, y, cpu),
                      Catch::Contains("add_dropout_forward: residual is f32 (3, 4) on cpu but s is"));
}

TEST_CASE("attention_dropout of padded tiles drops what the unpadded tile drops", "[dropout]") {
  Stream cpu(Device::cpu());
  const RngKey key{77, 5, 9};
  const int64_t G = 6, t = 5, s = 7;
  uint64_t seed = 800;
  for (DType dtype : {DType::f32, DType::f64})
    for (float p : {0.1f, 0.5f})
      for (const auto& [tp, sp] : {std::pair<int64_t, int64_t>{t, s}, {8, 8}, {t, 8}, {8, s}}) {
        Tensor x = test::random({G, t, s}, dtype, ++seed);
        const std::vector<double> xv = test::to_f64(x), want = dropout_reference(xv, p, key);
        // The tile in the corner of a padded one whose padding is noise.
        std::vector<double> padded = test::to_f64(test::random({G, tp, sp}, dtype, ++seed));
        for (int64_t g = 0; g < G; ++g)
          for (int64_t i = 0; i < t; ++i)
            for (int64_t j = 0; j < s; ++j) padded[(g * tp + i) * sp + j] = xv[(g * t + i) * s + j];
        Tensor xp = test::from_f64(padded, {2, 3, tp, sp}, dtype), y({2, 3, tp, sp}, dtype);
        std::vector<double> want_padded(padded.size(), 0.0);
        for (int64_t g = 0; g < G; ++g)
          for (int64_t i = 0; i < t; ++i)
            for (int64_t j = 0; j < s; ++j) want_padded[(g * tp + i) * sp + j] = want[(g * t + i) * s + j];
        INFO(dtype_name(dtype) << " p=" << p << " tile " << tp << " x " << sp);
        const test::Tolerance tol = test::tolerance_for(dtype);
        ops::attention_dropout(xp, t, s, p, key, y, cpu);
        test::require_close({{"y", y, want_padded, tol}});
        ops::attention_dropout(xp, t, s, p, key, xp, cpu);  // in place
        test::require_close({{"y (in place)", xp, want_padded, tol}});
      }
  Tensor x({2, 4, 4}, DType::f32), y({2, 4, 4}, DType::f32);
  REQUIRE_THROWS_WITH(ops::attention_dropout(x, 5, 4, 0.1f, key, y, cpu),
                      Catch::Contains("attention_dropout: a (5, 4) tile does not fit the padded tiles"));
}
