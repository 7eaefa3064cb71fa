// CUDA elementwise ops (elementwise.h): add, ReLU and the activations
// forward/backward, Philox uniform,
// and the GEMM's bias/ReLU epilogue for when cuBLASLt cannot fuse it.
// Storage is f32, bf16 or f16; arithmetic is f32. add, ReLU and cast move
// 16-byte packs where the tensors allow (common.cuh).
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/elementwise.h"
#include "libcore/base/rng.h"

namespace tfm::ops::cuda {
namespace {

// y[i] = f(x0[i], x1[i]) over n elements in packs of kN (common.cuh): one
// grid-stride loop for every two-input element-wise op.
template <typename T, int kN, typename F>
__global__ void map2_kernel(const T* x0, const T* x1, T* y, int64_t n, F f) {
  using P = Pack<T, kN>;
  const int64_t packs = n / kN;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < packs;
       i += int64_t(gridDim.x) * blockDim.x) {
    const P a = reinterpret_cast<const P*>(x0)[i], b = reinterpret_cast<const P*>(x1)[i];
    P out;
#pragma unroll
    for (int j = 0; j < kN; ++j) out.v[j] = f(a.v[j], b.v[j]);
    reinterpret_cast<P*>(y)[i] = out;
  }
}

// Launches map2_kernel in 16-byte packs where the tensors allow, else
// element by element. x1 may be x0 (a one-input op).
template <typename T, typename F>
void map2(const T* x0, const T* x1, T* y, int64_t n, F f, cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kN = kPack16<T>;
  if (packable<kN>(n, x0, x1, static_cast<const T*>(y)))
    map2_kernel<T, kN><<<grid_for(n / kN), kThreads, 0, stream>>>(x0, x1, y, n, f);
  else
    map2_kernel<T, 1><<<grid_for(n), kThreads, 0, stream>>>(x0, x1, y, n, f);
  TFM_CHECK_LAUNCH();
}

template <typename T>
struct AddOp {
  __device__ T operator()(T a, T b) const { return from_float<T>(to_float(a) + to_float(b)); }
};
template <typename T>
struct ScaledDifferenceOp {
  float w;
  __device__ T operator()(T x, T base) const { return from_float<T>(w * (to_float(x) - to_float(base))); }
};
template <typename T>
struct ReluOp {
  __device__ T operator()(T x, T) const { return from_float<T>(fmaxf(to_float(x), 0.0f)); }
};
// (y, dy) -> dx: dy where the forward's output was positive.
template <typename T>
struct ReluBackwardOp {
  __device__ T operator()(T y, T dy) const { return to_float(y) > 0.0f ? dy : from_float<T>(0.0f); }
};

// act(x) and act'(x) in f32: the formulas of elementwise.h, as the CPU's.
__device__ float activation(Activation act, float x) {
  switch (act) {
    case Activation::relu: return fmaxf(x, 0.0f);
    case Activation::gelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
    case Activation::silu: return x / (1.0f + expf(-x));
  }
  return x;
}
__device__ float activation_slope(Activation act, float x) {
  switch (act) {
    case Activation::relu: return x > 0.0f ? 1.0f : 0.0f;
    case Activation::gelu:
      return 0.5f * (1.0f + erff(x * 0.70710678118654752440f)) +
             x * expf(-0.5f * x * x) * 0.39894228040143267794f;
    case Activation::silu: {
      const float s = 1.0f / (1.0f + expf(-x));
      return s * (1.0f + x * (1.0f - s));
    }
  }
  return 1.0f;
}
template <typename T>
struct ActivationOp {
  Activation act;
  __device__ T operator()(T x, T) const { return from_float<T>(activation(act, to_float(x))); }
};
// (x, dy) -> dx = dy act'(x)
template <typename T>
struct ActivationBackwardOp {
  Activation act;
  __device__ T operator()(T x, T dy) const {
    return from_float<T>(to_float(dy) * activation_slope(act, to_float(x)));
  }
};

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

// Packs of kN on both sides: 16 bytes on the wider one.
template <typename X, typename Y, int kN>
__global__ void cast_kernel(const X* x, Y* y, int64_t n) {
  const int64_t packs = n / kN;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < packs;
       i += int64_t(gridDim.x) * blockDim.x) {
    const Pack<X, kN> in = reinterpret_cast<const Pack<X, kN>*>(x)[i];
    Pack<Y, kN> out;
#pragma unroll
    for (int j = 0; j < kN; ++j) out.v[j] = from_float<Y>(to_float(in.v[j]));
    reinterpret_cast<Pack<Y, kN>*>(y)[i] = out;
  }
}

// y[r, j] = x[r, col + j] in units of U (the widest that every offset and
// row pitch is a multiple of).
template <typename U>
__global__ void copy_columns_kernel(const U* x, int64_t x_pitch, U* y, int64_t width, int64_t rows) {
  const int64_t total = rows * width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / width, j = i - r * width;
    y[i] = x[r * x_pitch + j];
  }
}

// y[index[r], j] = x[r, col + j] in units of U; a row whose index is
// outside [0, y_rows) is skipped.
template <typename U>
__global__ void scatter_columns_kernel(const U* x, int64_t x_pitch, const int32_t* index, U* y,
                                       int64_t y_rows, int64_t width, int64_t rows) {
  const int64_t total = rows * width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / width, j = i - r * width, to = index[r];
    if (to >= 0 && to < y_rows) y[to * width + j] = x[r * x_pitch + j];
  }
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

// The widest unit (16, 4, 2 or 1 bytes) that the source's and the
// destination's addresses and row pitches are multiples of.
template <typename F>
void with_copy_unit(const void* src, const void* dst, int64_t x_bytes, int64_t y_bytes, F&& f) {
  const auto fits = [&](int64_t u) {
    return reinterpret_cast<uintptr_t>(src) % u == 0 && reinterpret_cast<uintptr_t>(dst) % u == 0 &&
           x_bytes % u == 0 && y_bytes % u == 0;
  };
  if (fits(16)) return f(uint4{});
  if (fits(4)) return f(uint32_t{});
  if (fits(2)) return f(uint16_t{});
  f(uint8_t{});
}

}  // namespace
}  // namespace tfm::ops::cuda

namespace tfm::ops::impl {
using namespace cuda;  // the helpers above

template <>
void add<DeviceType::cuda>(const TensorView& a, const TensorView& b, const TensorView& y,
                           const Stream& stream) {
  const int64_t n = y.numel();
  if (n == 0) return;
  with_storage_type(y.dtype(), "add", [&](auto t) {
    using T = decltype(t);
    map2(static_cast<const T*>(a.data()), static_cast<const T*>(b.data()), static_cast<T*>(y.data()),
         n, AddOp<T>{}, native(stream));
  });
}

template <>
void scaled_difference<DeviceType::cuda>(const TensorView& x, const TensorView& base, float w, const TensorView& y,
                                         const Stream& stream) {
  const int64_t n = y.numel();
  if (n == 0) return;
  with_storage_type(y.dtype(), "scaled_difference", [&](auto t) {
    using T = decltype(t);
    map2(static_cast<const T*>(x.data()), static_cast<const T*>(base.data()), static_cast<T*>(y.data()), n,
         ScaledDifferenceOp<T>{w}, native(stream));
  });
}

template <>
void relu_forward<DeviceType::cuda>(const TensorView& x, const TensorView& y,
                                    const Stream& stream) {
  const int64_t n = y.numel();
  if (n == 0) return;
  with_storage_type(y.dtype(), "relu_forward", [&](auto t) {
    using T = decltype(t);
    const T* in = static_cast<const T*>(x.data());
    map2(in, in, static_cast<T*>(y.data()), n, ReluOp<T>{}, native(stream));
  });
}

template <>
void relu_backward<DeviceType::cuda>(const TensorView& y, const TensorView& dy,
                                     const TensorView& dx, const Stream& stream) {
  const int64_t n = dx.numel();
  if (n == 0) return;
  with_storage_type(dx.dtype(), "relu_backward", [&](auto t) {
    using T = decltype(t);
    map2(static_cast<const T*>(y.data()), static_cast<const T*>(dy.data()),
         static_cast<T*>(dx.data()), n, ReluBackwardOp<T>{}, native(stream));
  });
}

template <>
void activation_forward<DeviceType::cuda>(const TensorView& x, Activation act, const TensorView& y,
                                          const Stream& stream) {
  const int64_t n = y.numel();
  if (n == 0) return;
  with_storage_type(y.dtype(), "activation_forward", [&](auto t) {
    using T = decltype(t);
    const T* in = static_cast<const T*>(x.data());
    map2(in, in, static_cast<T*>(y.data()), n, ActivationOp<T>{act}, native(stream));
  });
}

template <>
void activation_backward<DeviceType::cuda>(const TensorView& x, const TensorView& dy, Activation act,
                                           const TensorView& dx, const Stream& stream) {
  const int64_t n = dx.numel();
  if (n == 0) return;
  with_storage_type(dx.dtype(), "activation_backward", [&](auto t) {
    using T = decltype(t);
    map2(static_cast<const T*>(x.data()), static_cast<const T*>(dy.data()), static_cast<T*>(dx.data()), n,
         ActivationBackwardOp<T>{act}, native(stream));
  });
}

template <>
void uniform<DeviceType::cuda>(const TensorView& out, const RngKey& key, float lo, float hi,
                               const Stream& stream) {
  const int64_t n = out.numel();
  if (n == 0) return;
  with_storage_type(out.dtype(), "uniform", [&](auto t) {
    using T = decltype(t);
    uniform_kernel<T><<<grid_for((n + 3) / 4), kThreads, 0, native(stream)>>>(
        static_cast<T*>(out.data()), n, key, lo, hi - lo);
    TFM_CHECK_LAUNCH();
  });
}

template <>
void cast<DeviceType::cuda>(const TensorView& x, const TensorView& y, const Stream& stream) {
  const int64_t n = x.numel();
  with_storage_type(x.dtype(), "cast", [&](auto xt) {
    with_storage_type(y.dtype(), "cast", [&](auto yt) {
      using X = decltype(xt);
      using Y = decltype(yt);
      constexpr int kN = kPack16<X> < kPack16<Y> ? kPack16<X> : kPack16<Y>;
      const X* in = static_cast<const X*>(x.data());
      Y* out = static_cast<Y*>(y.data());
      if (packable<kN>(n, in, static_cast<const Y*>(out)))
        cast_kernel<X, Y, kN><<<grid_for(n / kN), kThreads, 0, native(stream)>>>(in, out, n);
      else
        cast_kernel<X, Y, 1><<<grid_for(n), kThreads, 0, native(stream)>>>(in, out, n);
      TFM_CHECK_LAUNCH();
    });
  });
}

template <>
void copy_columns<DeviceType::cuda>(const TensorView& x, int64_t col, const TensorView& y,
                                    const Stream& stream) {
  const int64_t el = static_cast<int64_t>(dtype_size(x.dtype()));
  const auto* src = static_cast<const char*>(x.data()) + col * el;
  const int64_t x_bytes = x.dim(1) * el, y_bytes = y.dim(1) * el, rows = y.dim(0);
  with_copy_unit(src, y.data(), x_bytes, y_bytes, [&](auto unit) {
    using U = decltype(unit);
    constexpr int64_t u = sizeof(U);
    copy_columns_kernel<U><<<grid_for(rows * (y_bytes / u)), kThreads, 0, native(stream)>>>(
        reinterpret_cast<const U*>(src), x_bytes / u, static_cast<U*>(y.data()), y_bytes / u, rows);
    TFM_CHECK_LAUNCH();
  });
}

template <>
void scatter_columns<DeviceType::cuda>(const TensorView& x, int64_t col, const TensorView& index,
                                       const TensorView& y, const Stream& stream) {
  const int64_t el = static_cast<int64_t>(dtype_size(x.dtype()));
  const auto* src = static_cast<const char*>(x.data()) + col * el;
  const int64_t x_bytes = x.dim(1) * el, y_bytes = y.dim(1) * el, rows = x.dim(0);
  with_copy_unit(src, y.data(), x_bytes, y_bytes, [&](auto unit) {
    using U = decltype(unit);
    constexpr int64_t u = sizeof(U);
    scatter_columns_kernel<U><<<grid_for(rows * (y_bytes / u)), kThreads, 0, native(stream)>>>(
        reinterpret_cast<const U*>(src), x_bytes / u, index.data_as<int32_t>(),
        static_cast<U*>(y.data()), y.dim(0), y_bytes / u, rows);
    TFM_CHECK_LAUNCH();
  });
}

}  // namespace tfm::ops::impl

namespace tfm::ops::cuda {
void bias_relu_inplace(const TensorView& c, int64_t rows, int64_t n, const TensorView& bias,
                       bool relu, cudaStream_t stream) {
  if (rows * n == 0 || (bias.empty() && !relu)) return;
  with_storage_type(c.dtype(), "gemm", [&](auto t) {
    using T = decltype(t);
    // bias has C's dtype (kernels/gemm.cc checks it).
    bias_relu_kernel<T, T><<<grid_for(rows * n), kThreads, 0, stream>>>(
        static_cast<T*>(c.data()), rows, n, static_cast<const T*>(bias.data()), relu);
    TFM_CHECK_LAUNCH();
  });
}
}  // namespace tfm::ops::cuda

// Storage types instantiated above, closed list: float, __nv_bfloat16, __half
// (through with_storage_type).
