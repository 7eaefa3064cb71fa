// CPU Adam (adam.h): one pass over the flat buffers, in place, with bias
// correction and the gradient scale (clipping, loss scaling) applied first.
// The corrections 1 - beta^step are computed once in double (adam_schedule),
// or come with update_control's decision, which is made here too.
#include <cmath>

#include "kernels/adam.h"
#include "kernels/cpu/common.h"

namespace tfm::ops::cpu {
namespace {

template <typename T>
void adam_typed(T* p, const T* grads, T* m, T* v, int64_t n, const AdamOptions& o,
                const T* control) {
  const AdamSchedule s = adam_schedule(o.lr, o.beta1, o.beta2, o.step);
  T bc1 = static_cast<T>(s.bias1), bc2 = static_cast<T>(s.bias2), lr = static_cast<T>(s.lr);
  T gs = o.grad_scale;
  if (control) {  // update_control's decision (adam.h)
    if (control[0] == T(0)) return;
    gs = control[1];
    lr = control[2];
    bc1 = control[3];
    bc2 = control[4];
  }
  const T b1 = o.beta1, b2 = o.beta2, eps = o.eps;
  if (o.weight_decay != 0) {  // AdamW's decay, before the step (adam.h)
    const T keep = T(1) - lr * static_cast<T>(o.weight_decay);
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) p[i] *= keep;
  }
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T g = gs * grads[i];
    m[i] = b1 * m[i] + (T(1) - b1) * g;
    v[i] = b2 * v[i] + (T(1) - b2) * g * g;
    p[i] -= lr * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + eps);
  }
}

template <typename T>
void update_control_typed(const T* sums, double loss_scale, double max_norm,
                          const AdamSchedule& next, const AdamSchedule& retry, T* c) {
  const impl::UpdateDecision d = impl::decide_update(sums[0], sums[1], sums[2], loss_scale, max_norm);
  const AdamSchedule& s = c[0] != T(0) ? next : retry;
  c[0] = d.applied;
  c[1] = d.grad_scale;
  c[2] = static_cast<T>(s.lr);
  c[3] = static_cast<T>(s.bias1);
  c[4] = static_cast<T>(s.bias2);
}

}  // namespace
}  // namespace tfm::ops::cpu

namespace tfm::ops::impl {
using namespace cpu;  // the helpers above

template <>
void adam_step<DeviceType::cpu>(const TensorView& params, const TensorView& grads,
                                const TensorView& m, const TensorView& v, const AdamOptions& o,
                                const TensorView& control, const Stream&) {
  const bool c = !control.empty();
  switch (params.dtype()) {
    case DType::f32:
      return adam_typed<float>(params.data_as<float>(), grads.data_as<float>(),
                               m.data_as<float>(), v.data_as<float>(), params.numel(), o,
                               c ? control.data_as<float>() : nullptr);
    case DType::f64:
      return adam_typed<double>(params.data_as<double>(), grads.data_as<double>(),
                                m.data_as<double>(), v.data_as<double>(), params.numel(), o,
                                c ? control.data_as<double>() : nullptr);
    default:
      fail("adam_step: {} is not supported on the cpu", dtype_name(params.dtype()));
  }
}

template <>
void update_control<DeviceType::cpu>(const TensorView& sums, double loss_scale, double max_norm,
                                     const AdamSchedule& next, const AdamSchedule& retry,
                                     const TensorView& control, const Stream&) {
  if (sums.dtype() == DType::f64)
    return update_control_typed(sums.data_as<double>(), loss_scale, max_norm, next, retry,
                                control.data_as<double>());
  update_control_typed(sums.data_as<float>(), loss_scale, max_norm, next, retry,
                       control.data_as<float>());
}

}  // namespace tfm::ops::impl
