// CUDA dropout (dropout.h): forward, backward and the pre-norm residual add.
// keep_i = uniform01(philox_bits(key, i)) >= p over the flat index i, so the
// GPU drops exactly the elements the CPU drops. The scale 1 / (1 - p) is
// computed once on the host as a float and multiplied in with __fmul_rn /
// __fadd_rn, which nvcc never contracts into a fused multiply-add: in f32
// the kept values are the CPU's bits. Storage f32, bf16 or f16, math in f32.
#include "kernels/cuda/common.cuh"
#include "kernels/dropout.h"
#include "libcore/base/rng.h"

namespace tfm::ops::cuda {
namespace {

// One thread per Philox block of four consecutive elements.
// y = [residual +] x * keep * scale; y may be x or residual; residual may be
// null (plain dropout).
__device__ __forceinline__ float dropped(const Philox4& r, int lane, float p, float x, float scale) {
  return uniform01(r.v[lane]) >= p ? __fmul_rn(x, scale) : 0.0f;
}

// kPacked: n is a multiple of 4 and the tensors are aligned to 4 elements,
// so a thread's block moves as one load or store (8 or 16 bytes).
template <typename T, bool kPacked>
__global__ void dropout_kernel(const T* residual, const T* x, T* y, int64_t n, RngKey key,
                               float p, float scale) {
  using P = Pack<T, 4>;
  const int64_t blocks = (n + 3) / 4;
  for (int64_t blk = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; blk < blocks;
       blk += int64_t(gridDim.x) * blockDim.x) {
    const Philox4 r = philox_block(key, static_cast<uint64_t>(blk));
    if constexpr (kPacked) {
      const P in = reinterpret_cast<const P*>(x)[blk];
      P res, out;
      if (residual) res = reinterpret_cast<const P*>(residual)[blk];
#pragma unroll
      for (int lane = 0; lane < 4; ++lane) {
        const float kept = dropped(r, lane, p, to_float(in.v[lane]), scale);
        out.v[lane] = from_float<T>(residual ? __fadd_rn(to_float(res.v[lane]), kept) : kept);
      }
      reinterpret_cast<P*>(y)[blk] = out;
    } else {
#pragma unroll
      for (int lane = 0; lane < 4; ++lane) {
        const int64_t i = blk * 4 + lane;
        if (i < n) {
          const float kept = dropped(r, lane, p, to_float(x[i]), scale);
          y[i] = from_float<T>(residual ? __fadd_rn(to_float(residual[i]), kept) : kept);
        }
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
    const T* res = static_cast<const T*>(residual.data());
    const T* in = static_cast<const T*>(x.data());
    T* out = static_cast<T*>(y.data());
    auto kernel = packable<4>(n, res, in, static_cast<const T*>(out)) ? dropout_kernel<T, true>
                                                                     : dropout_kernel<T, false>;
    kernel<<<grid_for((n + 3) / 4), kThreads, 0, native(stream)>>>(res, in, out, n, key, p, scale);
    TFM_CHECK_LAUNCH();
  });
}

// Padded attention tiles (G, Tp, Sp) holding (G, T, S) weights: one thread
// an element of the padded layout; a kept element draws its word from the
// unpadded tile's flat index (one Philox block per element: attention
// dropout is rare, and the padded tiles are small next to a GEMM).
template <typename T>
__global__ void tile_dropout_kernel(const T* x, T* y, int64_t n, int64_t t, int64_t s,
                                    int64_t tp, int64_t sp, RngKey key, float p, float scale) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e % sp, r = e / sp, i = r % tp, g = r / tp;
    float out = 0.0f;
    if (i < t && j < s) {
      const uint64_t flat = static_cast<uint64_t>((g * t + i) * s + j);
      out = uniform01(philox_bits(key, flat)) >= p ? __fmul_rn(to_float(x[e]), scale) : 0.0f;
    }
    y[e] = from_float<T>(out);
  }
}

}  // namespace
}  // namespace tfm::ops::cuda

namespace tfm::ops::impl {
using namespace cuda;  // the helpers above

template <>
void attention_dropout<DeviceType::cuda>(const TensorView& x, int64_t t, int64_t s, float p,
                                         const RngKey& key, const TensorView& y,
                                         const Stream& stream) {
  const int64_t tp = x.dim(-2), sp = x.dim(-1), n = y.numel();
  if (tp == t && sp == s) return launch_dropout({}, x, p, key, y, stream, "attention_dropout");
  const float scale = 1.0f / (1.0f - p);
  with_storage_type(y.dtype(), "attention_dropout", [&](auto v) {
    using T = decltype(v);
    tile_dropout_kernel<T><<<grid_for(n), kThreads, 0, native(stream)>>>(
        static_cast<const T*>(x.data()), static_cast<T*>(y.data()), n, t, s, tp, sp, key, p, scale);
    TFM_CHECK_LAUNCH();
  });
}

template <>
void dropout_forward<DeviceType::cuda>(const TensorView& x, float p, const RngKey& key,
                                       const TensorView& y, const Stream& stream) {
  launch_dropout({}, x, p, key, y, stream, "dropout_forward");
}

// The mask is the forward's (same key, same index), so backward is the same
// kernel applied to dy.
template <>
void dropout_backward<DeviceType::cuda>(const TensorView& dy, float p, const RngKey& key,
                                        const TensorView& dx, const Stream& stream) {
  launch_dropout({}, dy, p, key, dx, stream, "dropout_backward");
}

template <>
void add_dropout_forward<DeviceType::cuda>(const TensorView& residual, const TensorView& s, float p,
                                           const RngKey& key, const TensorView& y,
                                           const Stream& stream) {
  launch_dropout(residual, s, p, key, y, stream, "add_dropout_forward");
}

}  // namespace tfm::ops::impl

// Storage types instantiated above, closed list: float, __nv_bfloat16, __half
// (through with_storage_type).
