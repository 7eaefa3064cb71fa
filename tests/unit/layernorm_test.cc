// CPU layer norm and the fused add + dropout + layer norm against float64
// references in f32 and f64, and their backward against central finite
// differences in double of L = sum(w * y).
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

namespace {

struct LnRef {
  std::vector<double> y, mean, rstd, dx, dgamma, dbeta;
};

// Plain float64 layer norm forward and backward over rows of (R, D);
// dgamma0 and dbeta0 are the accumulators' starting values.
LnRef ln_reference(const std::vector<double>& x, const std::vector<double>& gamma,
                   const std::vector<double>& beta, const std::vector<double>& dy,
                   std::vector<double> dgamma0, std::vector<double> dbeta0, int64_t rows,
                   int64_t d, double eps) {
  LnRef r;
  r.y.resize(x.size());
  r.dx.resize(x.size());
  for (int64_t i = 0; i < rows; ++i) {
    const double* xr = &x[static_cast<size_t>(i * d)];
    const double* dyr = &dy[static_cast<size_t>(i * d)];
    double mu = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mu += xr[j] / static_cast<double>(d);
    for (int64_t j = 0; j < d; ++j) var += (xr[j] - mu) * (xr[j] - mu) / static_cast<double>(d);
    const double rs = 1 / std::sqrt(var + eps);
    r.mean.push_back(mu);
    r.rstd.push_back(rs);
    double mg = 0, mgx = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double xh = (xr[j] - mu) * rs, g = gamma[static_cast<size_t>(j)] * dyr[j];
      r.y[static_cast<size_t>(i * d + j)] = gamma[static_cast<size_t>(j)] * xh + beta[static_cast<size_t>(j)];
      mg += g / static_cast<double>(d);
      mgx += g * xh / static_cast<double>(d);
      dgamma0[static_cast<size_t>(j)] += dyr[j] * xh;
      dbeta0[static_cast<size_t>(j)] += dyr[j];
    }
    for (int64_t j = 0; j < d; ++j) {
      const double xh = (xr[j] - mu) * rs, g = gamma[static_cast<size_t>(j)] * dyr[j];
      r.dx[static_cast<size_t>(i * d + j)] = rs * (g - mg - xh * mgx);
    }
  }
  r.dgamma = std::move(dgamma0);
  r.dbeta = std::move(dbeta0);
  return r;
}

const test::Tolerance kFd{1e-7, 1e-6};

}  // namespace

TEST_CASE("layernorm forward and backward match float64", "[layernorm]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 300;
  const float eps = 1e-5f;
  // (R, D): odd, one row, and one over the parallel threshold.
  const std::pair<int64_t, int64_t> sizes[] = {{7, 13}, {1, 5}, {64, 515}};
  for (DType dtype : {DType::f32, DType::f64})
    for (auto [rows, d] : sizes) {
      const DType st = dtype;  // statistics: f32 for f32, f64 for f64
      Tensor x = test::random({rows, d}, dtype, ++seed, -2, 3);
      Tensor gamma = test::random({d}, dtype, ++seed, 0.5, 1.5), beta = test::random({d}, dtype, ++seed);
      Tensor dy = test::random({rows, d}, dtype, ++seed);
      Tensor dgamma = test::random({d}, dtype, ++seed), dbeta = test::random({d}, dtype, ++seed);
      Tensor y({rows, d}, dtype), dx({rows, d}, dtype), mean({rows}, st), rstd({rows}, st);
      const LnRef ref = ln_reference(test::to_f64(x), test::to_f64(gamma), test::to_f64(beta),
                                     test::to_f64(dy), test::to_f64(dgamma), test::to_f64(dbeta),
                                     rows, d, eps);
      ops::layernorm_forward(x, gamma, beta, eps, y, mean, rstd, cpu);
      ops::layernorm_backward(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, cpu);
      INFO(dtype_name(dtype) << " R=" << rows << " D=" << d);
      test::require_close({{"y", y, ref.y, test::tolerance_for(dtype, d)},
                           {"mean", mean, ref.mean, test::tolerance_for(dtype, d)},
                           {"rstd", rstd, ref.rstd, test::tolerance_for(dtype, d)},
                           {"dx", dx, ref.dx, test::tolerance_for(dtype, d)},
                           {"dgamma (+=)", dgamma, ref.dgamma, test::tolerance_for(dtype, rows)},
                           {"dbeta (+=)", dbeta, ref.dbeta, test::tolerance_for(dtype, rows)}});
      // dx may be dy.
      Tensor g2 = Tensor::zeros({d}, dtype), b2 = Tensor::zeros({d}, dtype);
      ops::layernorm_backward(x, gamma, mean, rstd, dy, dy, g2, b2, cpu);
      test::require_close({{"dx (in place over dy)", dy, ref.dx, test::tolerance_for(dtype, d)}});
    }
}

TEST_CASE("layernorm backward equals finite differences in double", "[layernorm]") {
  Stream cpu(Device::cpu());
  const int64_t rows = 4, d = 7;
  const float eps = 1e-5f;
  Tensor x = test::random({rows, d}, DType::f64, 11, -2, 2);
  Tensor gamma = test::random({d}, DType::f64, 12, 0.5, 1.5), beta = test::random({d}, DType::f64, 13);
  Tensor w = test::random({rows, d}, DType::f64, 14);
  Tensor y({rows, d}, DType::f64), mean({rows}, DType::f64), rstd({rows}, DType::f64);
  Tensor dx({rows, d}, DType::f64);
  Tensor dgamma = Tensor::zeros({d}, DType::f64), dbeta = Tensor::zeros({d}, DType::f64);
  ops::layernorm_forward(x, gamma, beta, eps, y, mean, rstd, cpu);
  ops::layernorm_backward(x, gamma, mean, rstd, w, dx, dgamma, dbeta, cpu);
  auto loss = [&] {
    ops::layernorm_forward(x, gamma, beta, eps, y, mean, rstd, cpu);
    return test::weighted_sum(w, y);
  };
  test::require_close({{"dx vs finite differences", dx, test::finite_difference(x, loss), kFd},
                       {"dgamma vs finite differences", dgamma, test::finite_difference(gamma, loss), kFd},
                       {"dbeta vs finite differences", dbeta, test::finite_difference(beta, loss), kFd}});
}

TEST_CASE("add_dropout_layernorm matches its parts and float64", "[layernorm]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 400;
  const float eps = 1e-6f;
  const RngKey key{77, 5, 2};
  for (DType dtype : {DType::f32, DType::f64})
    for (float p : {0.0f, 0.25f}) {
      const int64_t rows = 9, d = 21;
      Tensor res = test::random({rows, d}, dtype, ++seed), s = test::random({rows, d}, dtype, ++seed);
      Tensor gamma = test::random({d}, dtype, ++seed, 0.5, 1.5), beta = test::random({d}, dtype, ++seed);
      Tensor dy = test::random({rows, d}, dtype, ++seed);
      Tensor h({rows, d}, dtype), y({rows, d}, dtype), mean({rows}, dtype), rstd({rows}, dtype);
      Tensor dh({rows, d}, dtype), ds({rows, d}, dtype);
      Tensor dgamma = Tensor::zeros({d}, dtype), dbeta = Tensor::zeros({d}, dtype);
      // Reference: h from the definition of the mask, then plain layer norm.
      const std::vector<double> rv = test::to_f64(res), sv = test::to_f64(s);
      const double inv = static_cast<float>(1.0f / (1.0f - p));
      std::vector<double> h_ref(rv.size()), keep(rv.size());
      for (size_t i = 0; i < rv.size(); ++i) {
        keep[i] = uniform01(philox_bits(key, i)) >= p ? inv : 0.0;
        h_ref[i] = rv[i] + sv[i] * keep[i];
      }
      const std::vector<double> zeros(static_cast<size_t>(d), 0.0);
      const Tensor h_rounded = test::from_f64(h_ref, {rows, d}, dtype);
      const LnRef ln = ln_reference(test::to_f64(h_rounded), test::to_f64(gamma), test::to_f64(beta),
                                    test::to_f64(dy), zeros, zeros, rows, d, eps);
      std::vector<double> ds_ref(rv.size());
      for (size_t i = 0; i < rv.size(); ++i) ds_ref[i] = ln.dx[i] * keep[i];
      ops::add_dropout_layernorm_forward(res, s, p, key, gamma, beta, eps, h, y, mean, rstd, cpu);
      ops::add_dropout_layernorm_backward(h, gamma, mean, rstd, dy, p, key, dh, ds, dgamma, dbeta, cpu);
      INFO(dtype_name(dtype) << " p=" << p);
      const test::Tolerance tol = test::tolerance_for(dtype, d);
      test::require_close({{"h", h, h_ref, test::tolerance_for(dtype)},
                           {"y", y, ln.y, tol},
                           {"mean", mean, ln.mean, tol},
                           {"rstd", rstd, ln.rstd, tol},
                           {"dh", dh, ln.dx, tol},
                           {"ds", ds, ds_ref, tol},
                           {"dgamma", dgamma, ln.dgamma, test::tolerance_for(dtype, rows)},
                           {"dbeta", dbeta, ln.dbeta, test::tolerance_for(dtype, rows)}});
      // Bit for bit the two ops it fuses (one pass when p is 0).
      Tensor h2({rows, d}, dtype), y2({rows, d}, dtype), mean2({rows}, dtype), rstd2({rows}, dtype);
      ops::add_dropout_forward(res, s, p, key, h2, cpu);
      ops::layernorm_forward(h2, gamma, beta, eps, y2, mean2, rstd2, cpu);
      CHECK(test::to_f64(h) == test::to_f64(h2));
      CHECK(test::to_f64(y) == test::to_f64(y2));
      CHECK(test::to_f64(rstd) == test::to_f64(rstd2));
    }
}

TEST_CASE("add_dropout_layernorm backward equals finite differences in double", "[layernorm]") {
  // The same key gives the same mask on every forward, so L is a smooth
  // function of (residual, s, gamma, beta) and finite differences apply.
  Stream cpu(Device::cpu());
  const int64_t rows = 3, d = 11;
  const float eps = 1e-5f, p = 0.3f;
  const RngKey key{5, 1, 9};
  Tensor res = test::random({rows, d}, DType::f64, 21), s = test::random({rows, d}, DType::f64, 22);
  Tensor gamma = test::random({d}, DType::f64, 23, 0.5, 1.5), beta = test::random({d}, DType::f64, 24);
  Tensor w = test::random({rows, d}, DType::f64, 25);
  Tensor h({rows, d}, DType::f64), y({rows, d}, DType::f64);
  Tensor mean({rows}, DType::f64), rstd({rows}, DType::f64);
  Tensor dh({rows, d}, DType::f64), ds({rows, d}, DType::f64);
  Tensor dgamma = Tensor::zeros({d}, DType::f64), dbeta = Tensor::zeros({d}, DType::f64);
  ops::add_dropout_layernorm_forward(res, s, p, key, gamma, beta, eps, h, y, mean, rstd, cpu);
  ops::add_dropout_layernorm_backward(h, gamma, mean, rstd, w, p, key, dh, ds, dgamma, dbeta, cpu);
  auto loss = [&] {
    ops::add_dropout_layernorm_forward(res, s, p, key, gamma, beta, eps, h, y, mean, rstd, cpu);
    return test::weighted_sum(w, y);
  };
  test::require_close({{"dh (d residual) vs finite differences", dh, test::finite_difference(res, loss), kFd},
                       {"ds vs finite differences", ds, test::finite_difference(s, loss), kFd},
                       {"dgamma vs finite differences", dgamma, test::finite_difference(gamma, loss), kFd},
                       {"dbeta vs finite differences", dbeta, test::finite_difference(beta, loss), kFd}});
  // Some of s is dropped (its gradient is exactly 0), some kept.
  int dropped = 0;
  for (double v : test::to_f64(ds)) dropped += v == 0.0;
  CHECK(dropped > 0);
  CHECK(dropped < rows * d);
}

TEST_CASE("layernorm rejects bad tensors with a sentence", "[layernorm]") {
  Stream cpu(Device::cpu());
  Tensor x({4, 6}, DType::f32), y({4, 6}, DType::f32), g({6}, DType::f32), b({6}, DType::f32);
  Tensor mean({4}, DType::f32), rstd({4}, DType::f32);
  Tensor g5({5}, DType::f32), mean64({4}, DType::f64), mean3({3}, DType::f32);
  REQUIRE_THROWS_WITH(ops::layernorm_forward(x, g5, b, 1e-5f, y, mean, rstd, cpu),
                      Catch::Contains("layernorm_forward: gamma is f32 (5) on cpu but must be (6)"));
  REQUIRE_THROWS_WITH(ops::layernorm_forward(x, g, b, 1e-5f, y, mean64, rstd, cpu),
                      Catch::Contains("layernorm_forward: mean is f64 but must be f32"));
  REQUIRE_THROWS_WITH(ops::layernorm_forward(x, g, b, 1e-5f, y, mean3, rstd, cpu),
                      Catch::Contains("mean is f32 (3) on cpu but must be (4)"));
  Tensor g64({6}, DType::f64);
  REQUIRE_THROWS_WITH(ops::layernorm_backward(x, g, mean, rstd, y, y, g64, b, cpu),
                      Catch::Contains("layernorm_backward: dgamma is f64 but x is f32"));
  REQUIRE_THROWS_WITH(ops::add_dropout_layernorm_forward(x, x, 1.0f, {}, g, b, 1e-5f, y, y, mean,
                                                         rstd, cpu),
                      Catch::Contains("add_dropout_layernorm_forward: dropout probability p = 1"));
  Tensor v({6}, DType::f32);
  REQUIRE_THROWS_WITH(ops::layernorm_forward(v, g, b, 1e-5f, v, mean, rstd, cpu),
                      Catch::Contains("x is f32 (6) on cpu but must be (R, D)"));
}
