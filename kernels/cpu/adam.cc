// CPU Adam (ops.h): one pass over the flat buffers, in place, with bias
// correction and the gradient scale (clipping, loss scaling) applied first.
// The corrections 1 - beta^step are computed once in double.
#include <cmath>

#include "kernels/cpu/common.h"
#include "kernels/detail.h"

namespace tfm::ops::cpu {
namespace {

template <typename T>
void adam_typed(T* p, const T* grads, T* m, T* v, int64_t n, const AdamOptions& o) {
  const double step = static_cast<double>(o.step);
  const T bc1 = static_cast<T>(1.0 - std::pow(static_cast<double>(o.beta1), step));
  const T bc2 = static_cast<T>(1.0 - std::pow(static_cast<double>(o.beta2), step));
  const T b1 = o.beta1, b2 = o.beta2, lr = o.lr, eps = o.eps, gs = o.grad_scale;
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T g = gs * grads[i];
    m[i] = b1 * m[i] + (T(1) - b1) * g;
    v[i] = b2 * v[i] + (T(1) - b2) * g * g;
    p[i] -= lr * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + eps);
  }
}

}  // namespace

void adam_step(const TensorView& params, const TensorView& grads, const TensorView& m,
               const TensorView& v, const AdamOptions& o) {
  switch (params.dtype()) {
    case DType::f32:
      return adam_typed<float>(params.data_as<float>(), grads.data_as<float>(),
                               m.data_as<float>(), v.data_as<float>(), params.numel(), o);
    case DType::f64:
      return adam_typed<double>(params.data_as<double>(), grads.data_as<double>(),
                                m.data_as<double>(), v.data_as<double>(), params.numel(), o);
    default:
      fail("adam_step: {} is not supported on the cpu", dtype_name(params.dtype()));
  }
}

}  // namespace tfm::ops::cpu
