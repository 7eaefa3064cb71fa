// CPU layer norm (layernorm.h) and the fused post-norm sub-layer end. Row
// statistics and every sum run in double, in a fixed order (vector.h); dgamma
// and dbeta are summed over rows per column, so they do not depend on the
// thread count.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/common.h"
#include "kernels/cpu/vector.h"
#include "kernels/dropout.h"
#include "kernels/layernorm.h"

namespace tfm::ops::cpu {
namespace {

// One row of layer norm: y = gamma * (x - mean) * rstd + beta. y may alias x
// (the row is read first).
template <typename T>
TFM_CPU_CLONES void forward_row(const T* x, const T* gamma, const T* beta, double eps, T* y,
                                T* mean, T* rstd, int64_t d) {
  const double mu = sum_lanes(d, [&](int64_t j) { return x[j]; }) / static_cast<double>(d);
  // Two passes: no cancellation when |mean| >> std.
  const T mu_t = static_cast<T>(mu);
  const double sq = sum_lanes(d, [&](int64_t j) {
    const double c = static_cast<double>(x[j]) - mu;
    return c * c;
  });
  const T rs = static_cast<T>(1.0 / std::sqrt(sq / static_cast<double>(d) + eps));
  *mean = mu_t;
  *rstd = rs;
#pragma omp simd
  for (int64_t j = 0; j < d; ++j) y[j] = gamma[j] * ((x[j] - mu_t) * rs) + beta[j];
}

// x, y (R, D); mean, rstd (R) of T.
template <typename T>
void forward_rows(const T* x, const T* gamma, const T* beta, double eps, T* y, T* mean, T* rstd,
                  int64_t rows, int64_t d) {
#pragma omp parallel for if (rows * d > kParallelMin)
  for (int64_t r = 0; r < rows; ++r)
    forward_row(x + r * d, gamma, beta, eps, y + r * d, mean + r, rstd + r, d);
}

// Columns [j0, j1) of dgamma += sum_R dy * xhat and dbeta += sum_R dy, each
// column summed over the rows in order (lanes are columns: no reordering).
template <typename T>
TFM_CPU_CLONES void parameter_sums(const T* x, const T* mean, const T* rstd, const T* dy,
                                   T* dgamma, T* dbeta, int64_t rows, int64_t d, int64_t j0,
                                   int64_t j1) {
  constexpr int64_t kCols = 32;
  double acc_g[kCols] = {}, acc_b[kCols] = {};
  const int64_t w = j1 - j0;
  for (int64_t r = 0; r < rows; ++r) {
    const T m = mean[r], rs = rstd[r];
    const T* xr = x + r * d + j0;
    const T* dyr = dy + r * d + j0;
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) {
      acc_g[j] += static_cast<double>(dyr[j] * ((xr[j] - m) * rs));
      acc_b[j] += static_cast<double>(dyr[j]);
    }
  }
  for (int64_t j = 0; j < w; ++j) {
    dgamma[j0 + j] += static_cast<T>(acc_g[j]);
    dbeta[j0 + j] += static_cast<T>(acc_b[j]);
  }
}

// One row of dx = rstd * (g - mean_D(g) - xhat * mean_D(g * xhat)), g = gamma * dy.
// dx may alias dy (the row's sums are taken before it is written).
template <typename T>
TFM_CPU_CLONES void backward_row(const T* x, const T* gamma, T m, T rs, const T* dy, T* dx,
                                 int64_t d) {
  const double inv_d = 1.0 / static_cast<double>(d);
  const double mean_g = sum_lanes(d, [&](int64_t j) { return gamma[j] * dy[j]; }) * inv_d;
  const double mean_gx =
      sum_lanes(d, [&](int64_t j) { return gamma[j] * dy[j] * ((x[j] - m) * rs); }) * inv_d;
  const T a = static_cast<T>(mean_g), b = static_cast<T>(mean_gx);
#pragma omp simd
  for (int64_t j = 0; j < d; ++j) dx[j] = rs * (gamma[j] * dy[j] - a - (x[j] - m) * rs * b);
}

// dgamma += sum_R dy * xhat; dbeta += sum_R dy; then dx row by row. dx may
// alias dy: the parameter sums read dy first.
template <typename T>
void backward_rows(const T* x, const T* gamma, const T* mean, const T* rstd, const T* dy, T* dx,
                   T* dgamma, T* dbeta, int64_t rows, int64_t d) {
  constexpr int64_t kCols = 32;
  const int64_t blocks = (d + kCols - 1) / kCols;
#pragma omp parallel for if (rows * d > kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk)
    parameter_sums(x, mean, rstd, dy, dgamma, dbeta, rows, d, blk * kCols,
                   std::min(d, (blk + 1) * kCols));
#pragma omp parallel for if (rows * d > kParallelMin)
  for (int64_t r = 0; r < rows; ++r)
    backward_row(x + r * d, gamma, mean[r], rstd[r], dy + r * d, dx + r * d, d);
}

}  // namespace
}  // namespace tfm::ops::cpu

namespace tfm::ops::impl {
using namespace cpu;  // the helpers above

template <>
void layernorm_forward<DeviceType::cpu>(const TensorView& x, const TensorView& gamma,
                                        const TensorView& beta, float eps, const TensorView& y,
                                        const TensorView& mean, const TensorView& rstd,
                                        const Stream&) {
  with_float(y, "layernorm_forward", [&](auto* py) {
    using T = std::remove_pointer_t<decltype(py)>;
    const int64_t d = x.dim(-1);
    forward_rows<T>(x.data_as<T>(), gamma.data_as<T>(), beta.data_as<T>(), eps, py,
                    mean.data_as<T>(), rstd.data_as<T>(), x.numel() / d, d);
  });
}

template <>
void layernorm_backward<DeviceType::cpu>(const TensorView& x, const TensorView& gamma,
                                         const TensorView& mean, const TensorView& rstd,
                                         const TensorView& dy, const TensorView& dx,
                                         const TensorView& dgamma, const TensorView& dbeta,
                                         const Stream&) {
  with_float(dx, "layernorm_backward", [&](auto* pdx) {
    using T = std::remove_pointer_t<decltype(pdx)>;
    const int64_t d = x.dim(-1);
    backward_rows<T>(x.data_as<T>(), gamma.data_as<T>(), mean.data_as<T>(), rstd.data_as<T>(),
                     dy.data_as<T>(), pdx, dgamma.data_as<T>(), dbeta.data_as<T>(),
                     x.numel() / d, d);
  });
}

// h = residual + dropout(s), then y = LayerNorm(h): two passes over (R, D),
// the first the very add_dropout_forward, so both ops drop the same elements;
// one pass when p is 0.
template <>
void add_dropout_layernorm_forward<DeviceType::cpu>(const TensorView& residual, const TensorView& s,
                                                    float p, const RngKey& key,
                                                    const TensorView& gamma, const TensorView& beta,
                                                    float eps, const TensorView& h,
                                                    const TensorView& y, const TensorView& mean,
                                                    const TensorView& rstd, const Stream& stream) {
  if (p != 0.0f) {
    add_dropout_forward<DeviceType::cpu>(residual, s, p, key, h, stream);
    layernorm_forward<DeviceType::cpu>(h, gamma, beta, eps, y, mean, rstd, stream);
    return;
  }
  // Nothing dropped (decoding, evaluation): one pass, each row normalized
  // while its sum is in cache; the same arithmetic as the two passes.
  with_float(y, "add_dropout_layernorm_forward", [&](auto* py) {
    using T = std::remove_pointer_t<decltype(py)>;
    const int64_t d = h.dim(-1), rows = h.numel() / d;
    const T* pr = residual.data_as<T>();
    const T* ps = s.data_as<T>();
    T* ph = h.data_as<T>();
#pragma omp parallel for if (rows * d > kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
      T* hr = ph + r * d;
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) hr[j] = pr[r * d + j] + ps[r * d + j];
      forward_row(hr, gamma.data_as<T>(), beta.data_as<T>(), eps, py + r * d,
                  mean.data_as<T>() + r, rstd.data_as<T>() + r, d);
    }
  });
}

// dh = layer-norm backward of dy; ds = dropout_backward(dh).
template <>
void add_dropout_layernorm_backward<DeviceType::cpu>(const TensorView& h, const TensorView& gamma,
                                                     const TensorView& mean, const TensorView& rstd,
                                                     const TensorView& dy, float p,
                                                     const RngKey& key, const TensorView& dh,
                                                     const TensorView& ds, const TensorView& dgamma,
                                                     const TensorView& dbeta, const Stream& stream) {
  layernorm_backward<DeviceType::cpu>(h, gamma, mean, rstd, dy, dh, dgamma, dbeta, stream);
  dropout_backward<DeviceType::cpu>(dh, p, key, ds, stream);
}

}  // namespace tfm::ops::impl
