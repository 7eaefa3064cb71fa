// CUDA Adam (adam.h): one grid-stride pass over the flat f32 parameter,
// gradient and moment buffers, in place. The bias corrections depend only on
// the step, so the host computes them once, in double (adam_schedule), or
// update_control's one-thread kernel picks them on the device.
#include <cmath>

#include "kernels/adam.h"
#include "kernels/cuda/common.cuh"

namespace tfm::ops::cuda {
namespace {

struct AdamConstants {
  float lr, beta1, beta2, eps, grad_scale;
  float bias1, bias2;  // 1 - beta^step
  float weight_decay;
};

// g = grad_scale grads; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// params *= 1 - lr weight_decay (when not 0: AdamW's decay first);
// params -= lr (m / bias1) / (sqrt(v / bias2) + eps)
// control (update_control's, optional): {applied, grad_scale, lr, bias1,
// bias2} replace the constants', and an update not applied changes nothing.
__global__ void adam_kernel(float* params, const float* grads, float* m, float* v, int64_t n,
                            AdamConstants k, const float* control) {
  if (control) {
    if (control[0] == 0.0f) return;
    k.grad_scale = control[1];
    k.lr = control[2];
    k.bias1 = control[3];
    k.bias2 = control[4];
  }
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float g = k.grad_scale * grads[i];
    const float mi = k.beta1 * m[i] + (1.0f - k.beta1) * g;
    const float vi = k.beta2 * v[i] + (1.0f - k.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float p = params[i];
    if (k.weight_decay != 0.0f) p *= 1.0f - k.lr * k.weight_decay;
    params[i] = p - k.lr * (mi / k.bias1) / (sqrtf(vi / k.bias2) + k.eps);
  }
}

// One thread: update_control (adam.h), its arithmetic the CPU's (impl::decide_update).
template <typename S>
__global__ void update_control_kernel(const S* sums, double loss_scale, double max_norm,
                                      AdamSchedule next, AdamSchedule retry, float* control) {
  const impl::UpdateDecision d = impl::decide_update(static_cast<double>(sums[0]),
                                                         static_cast<double>(sums[1]),
                                                         static_cast<double>(sums[2]), loss_scale,
                                                         max_norm);
  const AdamSchedule s = control[0] != 0.0f ? next : retry;
  control[0] = d.applied;
  control[1] = d.grad_scale;
  control[2] = static_cast<float>(s.lr);
  control[3] = static_cast<float>(s.bias1);
  control[4] = static_cast<float>(s.bias2);
}

}  // namespace
}  // namespace tfm::ops::cuda

namespace tfm::ops::impl {
using namespace cuda;  // the helpers above

template <>
void adam_step<DeviceType::cuda>(const TensorView& params, const TensorView& grads,
                                 const TensorView& m, const TensorView& v, const AdamOptions& o,
                                 const TensorView& control, const Stream& stream) {
  for (const TensorView* t : {&params, &grads, &m, &v})
    if (t->dtype() != DType::f32) unsupported_dtype("adam_step", t->dtype());
  const int64_t n = params.numel();
  if (n == 0) return;
  const AdamSchedule s = adam_schedule(o.lr, o.beta1, o.beta2, o.step);
  const AdamConstants k{static_cast<float>(s.lr),    o.beta1, o.beta2, o.eps, o.grad_scale,
                        static_cast<float>(s.bias1), static_cast<float>(s.bias2), o.weight_decay};
  adam_kernel<<<grid_for(n), kThreads, 0, native(stream)>>>(
      static_cast<float*>(params.data()), static_cast<const float*>(grads.data()),
      static_cast<float*>(m.data()), static_cast<float*>(v.data()), n, k,
      control.empty() ? nullptr : static_cast<const float*>(control.data()));
  TFM_CHECK_LAUNCH();
}

template <>
void update_control<DeviceType::cuda>(const TensorView& sums, double loss_scale, double max_norm,
                                      const AdamSchedule& next, const AdamSchedule& retry,
                                      const TensorView& control, const Stream& stream) {
  update_control_kernel<float><<<1, 1, 0, native(stream)>>>(static_cast<const float*>(sums.data()),
                                                            loss_scale, max_norm, next, retry,
                                                            static_cast<float*>(control.data()));
  TFM_CHECK_LAUNCH();
}

}  // namespace tfm::ops::impl

// Storage types instantiated above, closed list: float only (master weights
// and optimizer state are f32 by design).
