// CPU layer norm (ops.h) and the fused post-norm sub-layer end. Row
// statistics and every sum run in double, in a fixed order; dgamma and dbeta
// are summed over rows per column, so they do not depend on the thread count.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/common.h"
#include "kernels/detail.h"

namespace tfm::ops::cpu {
namespace {

// x, y (R, D); mean, rstd (R) of T. y may alias x (each row is read first).
template <typename T>
void forward_rows(const T* x, const T* gamma, const T* beta, double eps, T* y, T* mean, T* rstd,
                  int64_t rows, int64_t d) {
#pragma omp parallel for if (rows * d > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * d;
    double sum = 0;
    for (int64_t j = 0; j < d; ++j) sum += xr[j];
    const double mu = sum / static_cast<double>(d);
    double sq = 0;  // two passes: no cancellation when |mean| >> std
    for (int64_t j = 0; j < d; ++j) sq += (xr[j] - mu) * (xr[j] - mu);
    const T m = static_cast<T>(mu);
    const T rs = static_cast<T>(1.0 / std::sqrt(sq / static_cast<double>(d) + eps));
    mean[r] = m;
    rstd[r] = rs;
    T* yr = y + r * d;
    for (int64_t j = 0; j < d; ++j) yr[j] = gamma[j] * ((xr[j] - m) * rs) + beta[j];
  }
}

// xhat = (x - mean) * rstd, g = gamma * dy;
// dx = rstd * (g - mean_D(g) - xhat * mean_D(g * xhat)); dgamma += sum_R dy * xhat;
// dbeta += sum_R dy. dx may alias dy: the parameter sums read dy first, and
// each row's dx is written only after its sums.
template <typename T>
void backward_rows(const T* x, const T* gamma, const T* mean, const T* rstd, const T* dy, T* dx,
                   T* dgamma, T* dbeta, int64_t rows, int64_t d) {
  constexpr int64_t kCols = 32;
  const int64_t blocks = (d + kCols - 1) / kCols;
#pragma omp parallel for if (rows * d > kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t j0 = blk * kCols, j1 = std::min(d, j0 + kCols);
    double acc_g[kCols] = {}, acc_b[kCols] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const double m = mean[r], rs = rstd[r];
      const T* xr = x + r * d;
      const T* dyr = dy + r * d;
      for (int64_t j = j0; j < j1; ++j) {
        acc_g[j - j0] += dyr[j] * ((xr[j] - m) * rs);
        acc_b[j - j0] += dyr[j];
      }
    }
    for (int64_t j = j0; j < j1; ++j) {
      dgamma[j] += static_cast<T>(acc_g[j - j0]);
      dbeta[j] += static_cast<T>(acc_b[j - j0]);
    }
  }
  const double inv_d = 1.0 / static_cast<double>(d);
#pragma omp parallel for if (rows * d > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const double m = mean[r], rs = rstd[r];
    const T* xr = x + r * d;
    const T* dyr = dy + r * d;
    double sum_g = 0, sum_gx = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double g = static_cast<double>(gamma[j]) * dyr[j];
      sum_g += g;
      sum_gx += g * ((xr[j] - m) * rs);
    }
    sum_g *= inv_d;
    sum_gx *= inv_d;
    T* dxr = dx + r * d;
    for (int64_t j = 0; j < d; ++j) {
      const double g = static_cast<double>(gamma[j]) * dyr[j];
      dxr[j] = static_cast<T>(rs * (g - sum_g - (xr[j] - m) * rs * sum_gx));
    }
  }
}

}  // namespace

void layernorm_forward(const TensorView& x, const TensorView& gamma, const TensorView& beta,
                       float eps, const TensorView& y, const TensorView& mean,
                       const TensorView& rstd) {
  with_float(y, "layernorm_forward", [&](auto* py) {
    using T = std::remove_pointer_t<decltype(py)>;
    const int64_t d = x.dim(-1);
    forward_rows<T>(x.data_as<T>(), gamma.data_as<T>(), beta.data_as<T>(), eps, py,
                    mean.data_as<T>(), rstd.data_as<T>(), x.numel() / d, d);
  });
}

void layernorm_backward(const TensorView& x, const TensorView& gamma, const TensorView& mean,
                        const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                        const TensorView& dgamma, const TensorView& dbeta) {
  with_float(dx, "layernorm_backward", [&](auto* pdx) {
    using T = std::remove_pointer_t<decltype(pdx)>;
    const int64_t d = x.dim(-1);
    backward_rows<T>(x.data_as<T>(), gamma.data_as<T>(), mean.data_as<T>(), rstd.data_as<T>(),
                     dy.data_as<T>(), pdx, dgamma.data_as<T>(), dbeta.data_as<T>(),
                     x.numel() / d, d);
  });
}

// h = residual + dropout(s), then y = LayerNorm(h): two passes over (R, D),
// the first the very add_dropout_forward, so both ops drop the same elements.
void add_dropout_layernorm_forward(const TensorView& residual, const TensorView& s, float p,
                                   const RngKey& key, const TensorView& gamma,
                                   const TensorView& beta, float eps, const TensorView& h,
                                   const TensorView& y, const TensorView& mean,
                                   const TensorView& rstd) {
  add_dropout_forward(residual, s, p, key, h);
  layernorm_forward(h, gamma, beta, eps, y, mean, rstd);
}

// dh = layer-norm backward of dy; ds = dropout_backward(dh).
void add_dropout_layernorm_backward(const TensorView& h, const TensorView& gamma,
                                    const TensorView& mean, const TensorView& rstd,
                                    const TensorView& dy, float p, const RngKey& key,
                                    const TensorView& dh, const TensorView& ds,
                                    const TensorView& dgamma, const TensorView& dbeta) {
  layernorm_backward(h, gamma, mean, rstd, dy, dh, dgamma, dbeta);
  dropout_backward(dh, p, key, ds);
}

}  // namespace tfm::ops::cpu
