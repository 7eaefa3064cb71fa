// CPU output layer (loss.h): log-softmax, and the label-smoothed
// cross-entropy that writes its gradient over the logits in place. Both use
// the stable log-sum-exp, lse = max + log(sum exp(x - max)), summed in double;
// the loss sums add per-row values in row order, so they are deterministic.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/vector.h"
#include "kernels/loss.h"

namespace tfm::ops::cpu {
namespace {

// log(sum_v exp(x_v)) of one row.
template <typename T>
TFM_CPU_CLONES double log_sum_exp(const T* x, int64_t v) {
  const T mx = max_lanes(x, v);
  const double sum = sum_lanes(v, [&](int64_t j) { return exp_fast(x[j] - mx); });
  return mx + std::log(sum);
}

template <typename T>
TFM_CPU_CLONES void subtract(const T* x, double c, T* y, int64_t v) {
#pragma omp simd
  for (int64_t j = 0; j < v; ++j) y[j] = static_cast<T>(x[j] - c);
}

struct RowLoss {
  double loss = 0, nll = 0;
};

// One row of smoothed_cross_entropy with target t >= 0: the loss, and x :=
// grad_scale * (softmax(x) - (1 - eps) * onehot(t) - eps / V). Pass 1: max,
// sum of x. Pass 2: x := exp(x - max) in T, summed in double. Pass 3: x :=
// grad_scale * (softmax - target).
template <typename T>
TFM_CPU_CLONES RowLoss smoothed_ce_row(T* x, int64_t v, int32_t t, double eps, double gs) {
  const T mx = max_lanes(x, v);
  const double sum_x = sum_lanes(v, [&](int64_t j) { return x[j]; });
  const double x_t = x[t];
  const double sum_exp = sum_lanes(v, [&](int64_t j) { return x[j] = exp_fast(x[j] - mx); });
  const double lse = mx + std::log(sum_exp);
  RowLoss out;
  out.nll = lse - x_t;
  out.loss = (1 - eps) * out.nll + eps * (lse - sum_x / static_cast<double>(v));
  const T inv = static_cast<T>(gs / sum_exp), off = static_cast<T>(gs * eps / static_cast<double>(v));
#pragma omp simd
  for (int64_t j = 0; j < v; ++j) x[j] = x[j] * inv - off;
  x[t] -= static_cast<T>(gs * (1 - eps));
  return out;
}

}  // namespace
}  // namespace tfm::ops::cpu

namespace tfm::ops::impl {
using namespace cpu;  // the helpers above

template <>
void log_softmax<DeviceType::cpu>(const TensorView& x, const TensorView& y, const Stream&) {
  const int64_t v = x.dim(-1), rows = x.numel() / v;
  with_float(y, "log_softmax", [&](auto* py) {
    using T = std::remove_pointer_t<decltype(py)>;
    const T* px = x.data_as<T>();
#pragma omp parallel for if (x.numel() > kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
      const double lse = log_sum_exp(px + r * v, v);  // the row is read before y (may alias)
      subtract(px + r * v, lse, py + r * v, v);
    }
  });
}

// Per row with target t >= 0, logp = x - lse:
//   loss = (1 - eps) * -logp[t] + eps * mean_v(-logp[v]) = (1 - eps) * nll + eps * (lse - mean(x))
//   x := grad_scale * (softmax(x) - (1 - eps) * onehot(t) - eps / V)
template <>
void smoothed_cross_entropy<DeviceType::cpu>(const TensorView& logits, const TensorView& targets,
                                             float eps, float grad_scale, const TensorView& sums,
                                             const TensorView& dlogits, const Stream&) {
  const int64_t n = logits.dim(0), v = logits.dim(1);
  const int32_t* tgt = targets.data_as<int32_t>();
  for (int64_t r = 0; r < n; ++r)
    TFM_REQUIRE(tgt[r] < v, "smoothed_cross_entropy: targets[{}] is {}, outside the vocabulary "
                "[0, {}) (negative targets mark padding)", r, tgt[r], v);
  // The rows are computed in place: in dlogits, when it is another buffer
  // (same dtype, kernels/loss.cc).
  if (dlogits.data() != logits.data()) std::memcpy(dlogits.data(), logits.data(), logits.bytes());
  with_float(dlogits, "smoothed_cross_entropy", [&](auto* px) {
    using T = std::remove_pointer_t<decltype(px)>;
    std::vector<double> loss(static_cast<size_t>(n), 0.0), nll(static_cast<size_t>(n), 0.0);
    const double e = eps, gs = grad_scale;
#pragma omp parallel for if (logits.numel() > kParallelMin)
    for (int64_t r = 0; r < n; ++r) {
      T* x = px + r * v;
      const int32_t t = tgt[r];
      if (t < 0) {
        std::fill(x, x + v, T(0));
        continue;
      }
      const RowLoss row = smoothed_ce_row(x, v, t, e, gs);
      loss[static_cast<size_t>(r)] = row.loss;
      nll[static_cast<size_t>(r)] = row.nll;
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

}  // namespace tfm::ops::impl
