// CUDA dropout (ops.h): forward, backward and the pre-norm residual add.
// keep_i = uniform01(philox_bits(key, i)) >= p over the flat index i, so the
// GPU drops exactly the elements the CPU drops. The scale 1 / (1 - p) is
// computed once on the host as a float and multiplied in with __fmul_rn /
// __fadd_rn, which nvcc never contracts into a fused multiply-add: in f32
// the kept values are the CPU's bits. Storage f32, bf16 or f16, math in f32.
#include "kernels/cuda/common.cuh"
#include "kernels/detail.h"
#include "libcore/rng.h"

namespace tfm::ops::cuda {
namespace {

// One thread per Philox block of four consecutive elements.
// y = [residual +] x * keep * scale; y may be x or residual; residual may be
// null (plain dropout).
template <typename T>
__global__ void dropout_kernel(const T* residual, const T* x, T* y, int64_t n, RngKey key,
                               float p, float scale) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t blk = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; blk < blocks;
       blk += int64_t(gridDim.x) * blockDim.x) {
    const Philox4 r = philox_block(key, static_cast<uint64_t>(blk));
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      const int64_t i = blk * 4 + lane;
      if (i < n) {
        const bool keep = uniform01(r.v[lane]) >= p;
        const float kept = keep ? __fmul_rn(to_float(x[i]), scale) : 0.0f;
        y[i] = from_float<T>(residual ? __fadd_rn(to_float(residual[i]), kept) : kept);
      }
    }
  }
}

void launch_dropout(const TensorView& residual, const TensorView& x, float p, const RngKey& key,
                    const TensorView& y, const Stream& stream, const char* op) {
  const int64_t n = y.numel();
  if (n == 0) return;
  const float scale = 1.0f / (1.0f - p);
  with_storage_type(y.dtype(), op, [&](auto t) {
    using T = decltype(t);
    dropout_kernel<T><<<grid_for((n + 3) / 4), kThreads, 0, native(stream)>>>(
        static_cast<const T*>(residual.data()), static_cast<const T*>(x.data()),
        static_cast<T*>(y.data()), n, key, p, scale);
    TFM_CHECK_LAUNCH();
  });
}

}  // namespace

void dropout_forward(const TensorView& x, float p, const RngKey& key, const TensorView& y,
                     const Stream& stream) {
  launch_dropout({}, x, p, key, y, stream, "dropout_forward");
}

// The mask is the forward's (same key, same index), so backward is the same
// kernel applied to dy.
void dropout_backward(const TensorView& dy, float p, const RngKey& key, const TensorView& dx,
                      const Stream& stream) {
  launch_dropout({}, dy, p, key, dx, stream, "dropout_backward");
}

void add_dropout_forward(const TensorView& residual, const TensorView& s, float p,
                         const RngKey& key, const TensorView& y, const Stream& stream) {
  launch_dropout(residual, s, p, key, y, stream, "add_dropout_forward");
}

}  // namespace tfm::ops::cuda

// Storage types instantiated above, closed list: float, __nv_bfloat16, __half
// (through with_storage_type).
