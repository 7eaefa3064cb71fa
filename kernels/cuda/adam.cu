// CUDA Adam (ops.h): one grid-stride pass over the flat f32 parameter,
// gradient and moment buffers, in place. The bias corrections depend only on
// the step, so the host computes them once, in double.
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/detail.h"

namespace tfm::ops::cuda {
namespace {

struct AdamConstants {
  float lr, beta1, beta2, eps, grad_scale;
  float bias1, bias2;  // 1 - beta^step
};

// g = grad_scale grads; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// params -= lr (m / bias1) / (sqrt(v / bias2) + eps)
__global__ void adam_kernel(float* params, const float* grads, float* m, float* v, int64_t n,
                            AdamConstants k) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float g = k.grad_scale * grads[i];
    const float mi = k.beta1 * m[i] + (1.0f - k.beta1) * g;
    const float vi = k.beta2 * v[i] + (1.0f - k.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    params[i] -= k.lr * (mi / k.bias1) / (sqrtf(vi / k.bias2) + k.eps);
  }
}

}  // namespace

void adam_step(const TensorView& params, const TensorView& grads, const TensorView& m,
               const TensorView& v, const AdamOptions& o, const Stream& stream) {
  for (const TensorView* t : {&params, &grads, &m, &v})
    if (t->dtype() != DType::f32) unsupported_dtype("adam_step", t->dtype());
  const int64_t n = params.numel();
  if (n == 0) return;
  const double step = static_cast<double>(o.step);
  const AdamConstants k{o.lr,
                        o.beta1,
                        o.beta2,
                        o.eps,
                        o.grad_scale,
                        static_cast<float>(1.0 - std::pow(static_cast<double>(o.beta1), step)),
                        static_cast<float>(1.0 - std::pow(static_cast<double>(o.beta2), step))};
  adam_kernel<<<grid_for(n), kThreads, 0, native(stream)>>>(
      static_cast<float*>(params.data()), static_cast<const float*>(grads.data()),
      static_cast<float*>(m.data()), static_cast<float*>(v.data()), n, k);
  TFM_CHECK_LAUNCH();
}

}  // namespace tfm::ops::cuda

// Storage types instantiated above, closed list: float only (master weights
// and optimizer state are f32 by design).
