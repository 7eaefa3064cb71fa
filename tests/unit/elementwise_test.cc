// CPU elementwise ops against float64, and ReLU's backward against finite
// differences in double.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

namespace {
// Odd sizes, one of them over the threshold where the loops go parallel.
const Shape kShapes[] = {{1}, {7}, {3, 5, 11}, {37, 1031}};
}  // namespace

TEST_CASE("add matches float64", "[elementwise]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 1;
  for (DType dtype : {DType::f32, DType::f64})
    for (const Shape& shape : kShapes) {
      Tensor a = test::random(shape, dtype, ++seed), b = test::random(shape, dtype, ++seed);
      Tensor y(shape, dtype);
      std::vector<double> ref = test::to_f64(a);
      const std::vector<double> bv = test::to_f64(b);
      for (size_t i = 0; i < ref.size(); ++i) ref[i] += bv[i];
      ops::add(a, b, y, cpu);
      test::require_close({{"y", y, ref, test::tolerance_for(dtype)}});
      ops::add(a, b, a, cpu);  // in place
      test::require_close({{"a (in place)", a, ref, test::tolerance_for(dtype)}});
    }
}

TEST_CASE("relu forward and backward match float64", "[elementwise]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 50;
  for (DType dtype : {DType::f32, DType::f64})
    for (const Shape& shape : kShapes) {
      Tensor x = test::random(shape, dtype, ++seed), dy = test::random(shape, dtype, ++seed);
      Tensor y(shape, dtype), dx(shape, dtype);
      const std::vector<double> xv = test::to_f64(x), dyv = test::to_f64(dy);
      std::vector<double> y_ref(xv.size()), dx_ref(xv.size());
      for (size_t i = 0; i < xv.size(); ++i) {
        y_ref[i] = std::max(xv[i], 0.0);
        dx_ref[i] = xv[i] > 0 ? dyv[i] : 0.0;
      }
      ops::relu_forward(x, y, cpu);
      ops::relu_backward(y, dy, dx, cpu);
      test::require_close({{"y", y, y_ref, test::tolerance_for(dtype)},
                           {"dx", dx, dx_ref, test::tolerance_for(dtype)}});
    }
}

TEST_CASE("relu backward equals finite differences in double", "[elementwise]") {
  // L = sum(w * relu(x)); dL/dx by central differences, away from the kink.
  Stream cpu(Device::cpu());
  const Shape shape{5, 9};
  Tensor x = test::random(shape, DType::f64, 7), w = test::random(shape, DType::f64, 8);
  double* xs = x.data_as<double>();
  for (int64_t i = 0; i < x.numel(); ++i)
    if (std::abs(xs[i]) < 1e-3) xs[i] = 0.5;
  Tensor y(shape, DType::f64), dx(shape, DType::f64);
  ops::relu_forward(x, y, cpu);
  ops::relu_backward(y, w, dx, cpu);
  auto loss = [&] {
    ops::relu_forward(x, y, cpu);
    return test::weighted_sum(w, y);
  };
  std::vector<double> numeric = test::finite_difference(x, loss);
  test::require_close({{"dx vs finite differences", dx, numeric, {1e-8, 1e-7}}});
}

namespace {
// The activations of elementwise.h in double, written from their definitions.
double activation_ref(ops::Activation act, double x) {
  switch (act) {
    case ops::Activation::relu: return std::max(x, 0.0);
    case ops::Activation::gelu: return x * 0.5 * std::erfc(-x / std::sqrt(2.0));
    case ops::Activation::silu: return x / (1.0 + std::exp(-x));
  }
  return x;
}
constexpr ops::Activation kActivations[] = {ops::Activation::relu, ops::Activation::gelu,
                                            ops::Activation::silu};
}  // namespace

TEST_CASE("activations match float64 and their backward finite differences", "[elementwise]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 90;
  for (ops::Activation act : kActivations) {
    INFO("activation " << static_cast<int>(act));
    for (DType dtype : {DType::f32, DType::f64})
      for (const Shape& shape : kShapes) {
        Tensor x = test::random(shape, dtype, ++seed, -6.0f, 6.0f);
        Tensor y(shape, dtype);
        std::vector<double> ref = test::to_f64(x);
        for (double& v : ref) v = activation_ref(act, v);
        ops::activation_forward(x, act, y, cpu);
        test::require_close({{"y", y, ref, test::tolerance_for(dtype)}});
      }
    // L = sum(w * act(x)), away from relu's kink.
    Tensor x = test::random({5, 9}, DType::f64, ++seed, -4.0f, 4.0f), w = test::random({5, 9}, DType::f64, ++seed);
    for (int64_t i = 0; i < x.numel(); ++i)
      if (std::abs(x.data_as<double>()[i]) < 1e-3) x.data_as<double>()[i] = 0.5;
    Tensor y(x.shape(), DType::f64), dx(x.shape(), DType::f64);
    ops::activation_backward(x, w, act, dx, cpu);
    auto loss = [&] {
      ops::activation_forward(x, act, y, cpu);
      return test::weighted_sum(w, y);
    };
    const std::vector<double> numeric = test::finite_difference(x, loss);
    test::require_close({{"dx vs finite differences", dx, numeric, {1e-8, 1e-7}}});
    ops::activation_backward(x, w, act, w, cpu);  // in place: dx is dy
    test::require_close({{"dx in place", w, test::to_f64(dx), {0, 0}}});
  }
}

TEST_CASE("elementwise ops reject mismatched tensors", "[elementwise]") {
  Stream cpu(Device::cpu());
  Tensor a({3, 4}, DType::f32), b({4, 3}, DType::f32), y({3, 4}, DType::f32);
  REQUIRE_THROWS_WITH(ops::add(a, b, y, cpu), Catch::Contains("add: a is f32 (3, 4) on cpu but b is f32 (4, 3) on cpu"));
  Tensor i({3, 4}, DType::i32);
  REQUIRE_THROWS_WITH(ops::relu_forward(i, i, cpu), Catch::Contains("i32"));
  Tensor d({3, 4}, DType::f64);
  REQUIRE_THROWS_WITH(ops::relu_backward(a, d, a, cpu), Catch::Contains("dy is f64"));
}

TEST_CASE("cast rounds to nearest even between every float dtype", "[elementwise]") {
  Stream cpu(Device::cpu());
  Tensor x = test::random({3, 37}, DType::f32, 77, -300.0f, 300.0f);
  for (DType to : {DType::f64, DType::bf16, DType::f16, DType::f32}) {
    Tensor y(x.shape(), to), back(x.shape(), DType::f32);
    ops::cast(x, y, cpu);
    ops::cast(y, back, cpu);
    std::vector<double> want = test::to_f64(x);
    for (size_t i = 0; i < want.size(); ++i) {
      const float f = static_cast<float>(want[i]);
      want[i] = to == DType::bf16 ? static_cast<float>(bf16(f)) : to == DType::f16 ? static_cast<float>(f16(f)) : f;
    }
    INFO(dtype_name(to));
    test::require_close({{"x -> y -> f32", back, want, {0, 0}}});
  }
  Tensor i({3, 37}, DType::i32);
  REQUIRE_THROWS_WITH(ops::cast(x, i, cpu), Catch::Contains("cast: y is i32"));
}

TEST_CASE("copy_columns copies a block of columns of every row", "[elementwise]") {
  Stream cpu(Device::cpu());
  for (DType dtype : {DType::f32, DType::bf16, DType::f64}) {
    const Tensor x = test::random({5, 13}, dtype, 41, -9.0f, 9.0f);
    for (int64_t col : {0, 3, 9})
      for (int64_t w : {int64_t{1}, 13 - col}) {
        Tensor y({5, w}, x.dtype());
        ops::copy_columns(x, col, y, cpu);
        const std::vector<double> a = test::to_f64(x), b = test::to_f64(y);
        for (int64_t r = 0; r < 5; ++r)
          for (int64_t j = 0; j < w; ++j)
            REQUIRE(b[static_cast<size_t>(r * w + j)] == a[static_cast<size_t>(r * 13 + col + j)]);
      }
  }
  Tensor x({4, 6}, DType::f32), y({4, 3}, DType::f32), other({3, 3}, DType::f32), h({4, 3}, DType::bf16);
  REQUIRE_THROWS_WITH(ops::copy_columns(x, 4, y, cpu), Catch::Contains("columns [4, 7) of x"));
  REQUIRE_THROWS_WITH(ops::copy_columns(x, 0, other, cpu), Catch::Contains("copy_columns"));
  REQUIRE_THROWS_WITH(ops::copy_columns(x, 0, h, cpu), Catch::Contains("but y is bf16"));
}
