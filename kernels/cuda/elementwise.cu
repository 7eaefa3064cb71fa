// CUDA elementwise ops (ops.h): add, ReLU forward/backward, Philox uniform,
// and the GEMM's bias/ReLU epilogue for when cuBLASLt cannot fuse it.
// Storage is f32, bf16 or f16; arithmetic is f32.
#include "kernels/cuda/common.cuh"
#include "kernels/detail.h"
#include "libcore/rng.h"

namespace tfm::ops::cuda {
namespace {

template <typename T>
__global__ void add_kernel(const T* a, const T* b, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_float<T>(to_float(a[i]) + to_float(b[i]));
}

template <typename T>
__global__ void relu_forward_kernel(const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_float<T>(fmaxf(to_float(x[i]), 0.0f));
}

template <typename T>
__global__ void relu_backward_kernel(const T* y, const T* dy, T* dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = to_float(y[i]) > 0.0f ? dy[i] : from_float<T>(0.0f);
}

// One thread per Philox block of four elements.
template <typename T>
__global__ void uniform_kernel(T* out, int64_t n, RngKey key, float lo, float span) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t blk = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; blk < blocks;
       blk += int64_t(gridDim.x) * blockDim.x) {
    const Philox4 r = philox_block(key, static_cast<uint64_t>(blk));
#pragma unroll
    for (int lane = 0; lane < 4; ++lane)
      if (blk * 4 + lane < n) out[blk * 4 + lane] = from_float<T>(uniform_in(r.v[lane], lo, span));
  }
}

template <typename X, typename Y>
__global__ void cast_kernel(const X* x, Y* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_float<Y>(to_float(x[i]));
}

template <typename T, typename B>
__global__ void bias_relu_kernel(T* c, int64_t rows, int64_t n, const B* bias, bool relu) {
  const int64_t total = rows * n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v = to_float(c[i]);
    if (bias) v += to_float(bias[i % n]);
    if (relu) v = fmaxf(v, 0.0f);
    c[i] = from_float<T>(v);
  }
}

}  // namespace

void add(const TensorView& a, const TensorView& b, const TensorView& y, const Stream& stream) {
  const int64_t n = y.numel();
  if (n == 0) return;
  with_storage_type(y.dtype(), "add", [&](auto t) {
    using T = decltype(t);
    add_kernel<T><<<grid_for(n), kThreads, 0, native(stream)>>>(
        static_cast<const T*>(a.data()), static_cast<const T*>(b.data()), static_cast<T*>(y.data()),
        n);
    TFM_CHECK_LAUNCH();
  });
}

void relu_forward(const TensorView& x, const TensorView& y, const Stream& stream) {
  const int64_t n = y.numel();
  if (n == 0) return;
  with_storage_type(y.dtype(), "relu_forward", [&](auto t) {
    using T = decltype(t);
    relu_forward_kernel<T><<<grid_for(n), kThreads, 0, native(stream)>>>(
        static_cast<const T*>(x.data()), static_cast<T*>(y.data()), n);
    TFM_CHECK_LAUNCH();
  });
}

void relu_backward(const TensorView& y, const TensorView& dy, const TensorView& dx,
                   const Stream& stream) {
  const int64_t n = dx.numel();
  if (n == 0) return;
  with_storage_type(dx.dtype(), "relu_backward", [&](auto t) {
    using T = decltype(t);
    relu_backward_kernel<T><<<grid_for(n), kThreads, 0, native(stream)>>>(
        static_cast<const T*>(y.data()), static_cast<const T*>(dy.data()),
        static_cast<T*>(dx.data()), n);
    TFM_CHECK_LAUNCH();
  });
}

void uniform(const TensorView& out, const RngKey& key, float lo, float hi, const Stream& stream) {
  const int64_t n = out.numel();
  if (n == 0) return;
  with_storage_type(out.dtype(), "uniform", [&](auto t) {
    using T = decltype(t);
    uniform_kernel<T><<<grid_for((n + 3) / 4), kThreads, 0, native(stream)>>>(
        static_cast<T*>(out.data()), n, key, lo, hi - lo);
    TFM_CHECK_LAUNCH();
  });
}

void cast(const TensorView& x, const TensorView& y, const Stream& stream) {
  const int64_t n = x.numel();
  with_storage_type(x.dtype(), "cast", [&](auto xt) {
    with_storage_type(y.dtype(), "cast", [&](auto yt) {
      using X = decltype(xt);
      using Y = decltype(yt);
      cast_kernel<X, Y><<<grid_for(n), kThreads, 0, native(stream)>>>(
          static_cast<const X*>(x.data()), static_cast<Y*>(y.data()), n);
      TFM_CHECK_LAUNCH();
    });
  });
}

void bias_relu_inplace(const TensorView& c, int64_t rows, int64_t n, const TensorView& bias,
                       bool relu, cudaStream_t stream) {
  if (rows * n == 0 || (bias.empty() && !relu)) return;
  with_storage_type(c.dtype(), "gemm", [&](auto t) {
    using T = decltype(t);
    // bias has C's dtype (ops.cc checks it).
    bias_relu_kernel<T, T><<<grid_for(rows * n), kThreads, 0, stream>>>(
        static_cast<T*>(c.data()), rows, n, static_cast<const T*>(bias.data()), relu);
    TFM_CHECK_LAUNCH();
  });
}

}  // namespace tfm::ops::cuda

// Storage types instantiated above, closed list: float, __nv_bfloat16, __half
// (through with_storage_type).
