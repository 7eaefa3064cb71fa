// CPU log-softmax and label-smoothed cross-entropy against float64 (the
// latter against PyTorch's F.cross_entropy(label_smoothing=eps) formula), the
// in-place gradient against finite differences in double, and bad inputs.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

namespace {

std::vector<double> log_softmax_reference(const std::vector<double>& x, int64_t v) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / static_cast<size_t>(v); ++r) {
    const double* xr = &x[r * static_cast<size_t>(v)];
    const double mx = *std::max_element(xr, xr + v);
    double sum = 0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(xr[j] - mx);
    for (int64_t j = 0; j < v; ++j) y[r * static_cast<size_t>(v) + static_cast<size_t>(j)] = xr[j] - mx - std::log(sum);
  }
  return y;
}

struct CeRef {
  std::vector<double> grad;
  double loss = 0, nll = 0;
};

// Per row with t >= 0: q = (1 - eps) onehot(t) + eps / V; loss = -sum q logp.
CeRef ce_reference(const std::vector<double>& x, const std::vector<int>& targets, int64_t v,
                   double eps, double grad_scale) {
  const std::vector<double> logp = log_softmax_reference(x, v);
  CeRef r;
  r.grad.assign(x.size(), 0.0);
  for (size_t n = 0; n < targets.size(); ++n) {
    if (targets[n] < 0) continue;
    for (int64_t j = 0; j < v; ++j) {
      const size_t k = n * static_cast<size_t>(v) + static_cast<size_t>(j);
      const double q = (j == targets[n] ? 1 - eps : 0.0) + eps / static_cast<double>(v);
      r.loss -= q * logp[k];
      r.grad[k] = grad_scale * (std::exp(logp[k]) - q);
    }
    r.nll -= logp[n * static_cast<size_t>(v) + static_cast<size_t>(targets[n])];
  }
  return r;
}

}  // namespace

TEST_CASE("log_softmax matches float64, also far from zero", "[loss]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 1200;
  const std::pair<int64_t, int64_t> sizes[] = {{7, 13}, {1, 1}, {40, 1031}};  // (N, V)
  for (DType dtype : {DType::f32, DType::f64})
    for (auto [n, v] : sizes) {
      Tensor x = test::random({n, v}, dtype, ++seed, -30, 30), y({n, v}, dtype);
      if (dtype == DType::f64) x.data_as<double>()[0] += 1000;  // exp would overflow unshifted
      const std::vector<double> ref = log_softmax_reference(test::to_f64(x), v);
      ops::log_softmax(x, y, cpu);
      ops::log_softmax(x, x, cpu);  // y may be x
      INFO(dtype_name(dtype) << " N=" << n << " V=" << v);
      // Values reach ~1e3 after the shift; the tolerance is relative to them.
      test::require_close({{"y", y, ref, test::tolerance_for(dtype, v)},
                           {"y (in place)", x, ref, test::tolerance_for(dtype, v)}});
    }
}

TEST_CASE("smoothed_cross_entropy matches PyTorch's label smoothing in float64", "[loss]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 1300;
  const int64_t n = 7, v = 13;
  const std::vector<int> targets = {3, -1, 0, 12, 5, -1, 7};  // -1: padding rows
  Tensor tg = test::i32(targets);
  for (DType dtype : {DType::f32, DType::f64})
    for (float eps : {0.0f, 0.1f})
      for (float grad_scale : {1.0f, 0.25f}) {
        Tensor logits = test::random({n, v}, dtype, ++seed, -5, 5);
        const CeRef ref = ce_reference(test::to_f64(logits), targets, v, eps, grad_scale);
        Tensor sums = test::from_f64({1.5, -2.0}, {2}, dtype);  // accumulated onto
        ops::smoothed_cross_entropy(logits, tg, eps, grad_scale, sums, cpu);
        INFO(dtype_name(dtype) << " eps=" << eps << " grad_scale=" << grad_scale);
        test::require_close({{"logits (gradient)", logits, ref.grad, test::tolerance_for(dtype, v)},
                             {"sums (+=)", sums, {1.5 + ref.loss, -2.0 + ref.nll},
                              test::tolerance_for(dtype, n * v)}});
        // Padding rows are exactly zero.
        const std::vector<double> g = test::to_f64(logits);
        for (int64_t j = 0; j < v; ++j) CHECK(g[static_cast<size_t>(v + j)] == 0.0);
      }
}

TEST_CASE("smoothed_cross_entropy gradient equals finite differences in double", "[loss]") {
  Stream cpu(Device::cpu());
  const int64_t n = 4, v = 6;
  const float eps = 0.1f, grad_scale = 0.5f;
  const std::vector<int> targets = {2, 0, -1, 5};
  Tensor tg = test::i32(targets);
  Tensor x = test::random({n, v}, DType::f64, 71, -3, 3);
  Tensor grad({n, v}, DType::f64), sums = Tensor::zeros({2}, DType::f64);
  std::copy_n(x.data_as<double>(), x.numel(), grad.data_as<double>());
  ops::smoothed_cross_entropy(grad, tg, eps, grad_scale, sums, cpu);
  // L(x) = the loss sum; the op writes grad_scale * dL/dx.
  auto loss = [&] {
    Tensor work({n, v}, DType::f64), s = Tensor::zeros({2}, DType::f64);
    std::copy_n(x.data_as<double>(), x.numel(), work.data_as<double>());
    ops::smoothed_cross_entropy(work, tg, eps, grad_scale, s, cpu);
    return s.data_as<double>()[0];
  };
  std::vector<double> numeric = test::finite_difference(x, loss);
  for (double& g : numeric) g *= grad_scale;
  test::require_close({{"gradient vs finite differences", grad, numeric, {1e-8, 1e-7}}});
}

TEST_CASE("smoothed_cross_entropy writes into dlogits what it writes in place, logits untouched", "[loss]") {
  Stream cpu(Device::cpu());
  const Tensor tg = test::i32({4, -1, 0, 9, 3});
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor x = test::random({5, 10}, dtype, 73, -4, 4);
    Tensor in_place = test::cast(x, dtype), logits = test::cast(x, dtype), dlogits({5, 10}, dtype);
    Tensor s1 = Tensor::zeros({2}, dtype), s2 = Tensor::zeros({2}, dtype);
    ops::smoothed_cross_entropy(in_place, tg, 0.1f, 0.5f, s1, cpu);
    ops::smoothed_cross_entropy(logits, tg, 0.1f, 0.5f, s2, cpu, dlogits);
    INFO(dtype_name(dtype));
    CHECK(test::to_f64(dlogits) == test::to_f64(in_place));
    CHECK(test::to_f64(logits) == test::to_f64(x));
    CHECK(test::to_f64(s2) == test::to_f64(s1));
  }
}

TEST_CASE("loss ops reject bad targets, shapes and dtypes", "[loss]") {
  Stream cpu(Device::cpu());
  Tensor logits({3, 5}, DType::f32), sums = Tensor::zeros({2}, DType::f32);
  REQUIRE_THROWS_WITH(ops::smoothed_cross_entropy(logits, test::i32({0, 5, 1}), 0.1f, 1.0f, sums, cpu),
                      Catch::Contains("smoothed_cross_entropy: targets[1] is 5, outside the vocabulary [0, 5)"));
  REQUIRE_THROWS_WITH(ops::smoothed_cross_entropy(logits, test::i32({0, 1}), 0.1f, 1.0f, sums, cpu),
                      Catch::Contains("targets is i32 (2) on cpu but must be (3)"));
  Tensor sums64 = Tensor::zeros({2}, DType::f64);
  REQUIRE_THROWS_WITH(ops::smoothed_cross_entropy(logits, test::i32({0, 1, 2}), 0.1f, 1.0f, sums64, cpu),
                      Catch::Contains("sums is f64 but must be f32 for f32 logits"));
  REQUIRE_THROWS_WITH(ops::smoothed_cross_entropy(logits, test::i32({0, 1, 2}), 1.5f, 1.0f, sums, cpu),
                      Catch::Contains("label smoothing eps = 1.5 is outside [0, 1]"));
  Tensor d64({3, 5}, DType::f64), d_short({3, 4}, DType::f32);
  REQUIRE_THROWS_WITH(ops::smoothed_cross_entropy(logits, test::i32({0, 1, 2}), 0.1f, 1.0f, sums, cpu, d64),
                      Catch::Contains("dlogits is f64 but logits is f32"));
  REQUIRE_THROWS_WITH(ops::smoothed_cross_entropy(logits, test::i32({0, 1, 2}), 0.1f, 1.0f, sums, cpu, d_short),
                      Catch::Contains("dlogits is f32 (3, 4) on cpu but logits is f32 (3, 5) on cpu"));
  Tensor y({3, 4}, DType::f32);
  REQUIRE_THROWS_WITH(ops::log_softmax(logits, y, cpu),
                      Catch::Contains("log_softmax: x is f32 (3, 5) on cpu but y is f32 (3, 4) on cpu"));
}
