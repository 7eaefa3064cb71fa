// Shared pieces of the CUDA ops: storage types, float conversion, dtype
// dispatch and the launch shape of elementwise kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/check.h"
#include "libcore/stream.h"
#include "libcore/tensor.h"

namespace tfm::ops::cuda {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

[[noreturn]] inline void unsupported_dtype(const char* op, DType dtype) {
  throw Error(std::string(op) + ": " + std::string(dtype_name(dtype)) + " is not supported on cuda");
}

// Calls f(T{}) with the CUDA storage type of a float dtype.
template <typename F>
void with_storage_type(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(__nv_bfloat16{});
    case DType::f16: return f(__half{});
    default: unsupported_dtype(op, dtype);
  }
}

inline cudaStream_t native(const Stream& stream) {
  return static_cast<cudaStream_t>(stream.native());
}

// Grid for a grid-stride loop over n items: enough blocks to fill the GPU,
// not one block per item.
constexpr int kThreads = 256;
inline unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

// C (rows, n) = act(C + bias): the GEMM epilogue when cuBLASLt cannot fuse it.
void bias_relu_inplace(const TensorView& c, int64_t rows, int64_t n, const TensorView& bias,
                       bool relu, cudaStream_t stream);

}  // namespace tfm::ops::cuda
