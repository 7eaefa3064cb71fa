// CPU output layer (ops.h): log-softmax, and the label-smoothed
// cross-entropy that writes its gradient over the logits in place. Both use
// the stable log-sum-exp, lse = max + log(sum exp(x - max)), summed in double;
// the loss sums add per-row values in row order, so they are deterministic.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/detail.h"

namespace tfm::ops::cpu {
namespace {

// log(sum_v exp(x_v)) of one row, and its max (for reuse).
template <typename T>
double log_sum_exp(const T* x, int64_t v, double* max_out = nullptr) {
  T mx = x[0];
  for (int64_t j = 1; j < v; ++j) mx = std::max(mx, x[j]);
  double sum = 0;
  for (int64_t j = 0; j < v; ++j) sum += std::exp(static_cast<double>(x[j]) - mx);
  if (max_out) *max_out = mx;
  return mx + std::log(sum);
}

}  // namespace

void log_softmax(const TensorView& x, const TensorView& y) {
  const int64_t v = x.dim(-1), rows = x.numel() / v;
  with_float(y, "log_softmax", [&](auto* py) {
    using T = std::remove_pointer_t<decltype(py)>;
    const T* px = x.data_as<T>();
#pragma omp parallel for if (x.numel() > kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
      const double lse = log_sum_exp(px + r * v, v);  // the row is read before y (may alias)
      for (int64_t j = 0; j < v; ++j) py[r * v + j] = static_cast<T>(px[r * v + j] - lse);
    }
  });
}

// Per row with target t >= 0, logp = x - lse:
//   loss = (1 - eps) * -logp[t] + eps * mean_v(-logp[v]) = (1 - eps) * nll + eps * (lse - mean(x))
//   x := grad_scale * (softmax(x) - (1 - eps) * onehot(t) - eps / V)
void smoothed_cross_entropy(const TensorView& logits, const TensorView& targets, float eps,
                            float grad_scale, const TensorView& sums) {
  const int64_t n = logits.dim(0), v = logits.dim(1);
  const int32_t* tgt = targets.data_as<int32_t>();
  for (int64_t r = 0; r < n; ++r)
    TFM_REQUIRE(tgt[r] < v, "smoothed_cross_entropy: targets[{}] is {}, outside the vocabulary "
                "[0, {}) (negative targets mark padding)", r, tgt[r], v);
  with_float(logits, "smoothed_cross_entropy", [&](auto* px) {
    using T = std::remove_pointer_t<decltype(px)>;
    std::vector<double> loss(static_cast<size_t>(n), 0.0), nll(static_cast<size_t>(n), 0.0);
    const double e = eps, gs = grad_scale, uniform = e / static_cast<double>(v);
#pragma omp parallel for if (logits.numel() > kParallelMin)
    for (int64_t r = 0; r < n; ++r) {
      T* x = px + r * v;
      const int32_t t = tgt[r];
      if (t < 0) {
        std::fill(x, x + v, T(0));
        continue;
      }
      // Pass 1: max, sum of x and x[t]. Pass 2: x := exp(x - max) in T (one
      // exp per element, in float for f32), summed in double. Pass 3: x :=
      // grad_scale * (softmax - target).
      T mx = x[0];
      double sum_x = 0;
      for (int64_t j = 0; j < v; ++j) {
        mx = std::max(mx, x[j]);
        sum_x += x[j];
      }
      const double x_t = x[t];
      double sum_exp = 0;
      for (int64_t j = 0; j < v; ++j) {
        x[j] = std::exp(x[j] - mx);
        sum_exp += x[j];
      }
      const double lse = mx + std::log(sum_exp);
      const double row_nll = lse - x_t;
      nll[static_cast<size_t>(r)] = row_nll;
      loss[static_cast<size_t>(r)] = (1 - e) * row_nll + e * (lse - sum_x / static_cast<double>(v));
      const T inv = static_cast<T>(gs / sum_exp), off = static_cast<T>(gs * uniform);
      for (int64_t j = 0; j < v; ++j) x[j] = x[j] * inv - off;
      x[t] -= static_cast<T>(gs * (1 - e));
    }
    double loss_sum = 0, nll_sum = 0;
    for (int64_t r = 0; r < n; ++r) {
      loss_sum += loss[static_cast<size_t>(r)];
      nll_sum += nll[static_cast<size_t>(r)];
    }
    T* s = sums.data_as<T>();
    s[0] += static_cast<T>(loss_sum);
    s[1] += static_cast<T>(nll_sum);
  });
}

}  // namespace tfm::ops::cpu
