// CUDA reductions (reduce.h): sum_rows (bias gradients), sum_squares (the
// gradient norm for clipping) and scale. Both sums are deterministic: fixed
// partitions and fixed-order trees, no atomics, so a run repeats bit for bit.
// x is f32, bf16 or f16; sum_rows' out is f32, bf16 or f16 (FloatRef); the
// sum of squares is f32; arithmetic is f32.
#include "kernels/cuda/common.cuh"
#include "kernels/reduce.h"

namespace tfm::ops::cuda {
namespace {

template <typename T>
struct RowTerms {
  const T* x;
  int64_t n;
  __device__ void operator()(int64_t r, int64_t c, float (&acc)[1]) const {
    acc[0] += to_float(x[r * n + c]);
  }
};

// Stage 1: block b's share of sum x^2 (a grid-stride partition fixed by the
// grid size) into partial[b], or straight into out when there is one block.
constexpr int kSquareBlocks = 1024;  // at most; stage 2 is one block of this many threads

template <typename T>
__global__ void sum_squares_kernel(const T* x, int64_t n, float* out) {
  __shared__ float scratch[32];
  float sum = 0.0f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float v = to_float(x[i]);
    sum += v * v;
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

// Stage 2: out[0] = sum of the partials, in one block.
__global__ void sum_partials_kernel(const float* partial, int count, float* out) {
  __shared__ float scratch[32];
  float sum = 0.0f;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partial[i];
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) out[0] = sum;
}

template <typename T>
__global__ void scale_kernel(T* x, int64_t n, float alpha) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = from_float<T>(to_float(x[i]) * alpha);
}

}  // namespace
}  // namespace tfm::ops::cuda

namespace tfm::ops::impl {
using namespace cuda;  // the helpers above

template <>
void sum_rows<DeviceType::cuda>(const TensorView& x, const TensorView& out, const Stream& stream) {
  const int64_t n = out.numel(), rows = n == 0 ? 0 : x.numel() / n;
  if (rows == 0 || n == 0) return;
  const FloatRef o = float_ref(out, "sum_rows");
  with_storage_type(x.dtype(), "sum_rows", [&](auto t) {
    using T = decltype(t);
    column_sums<1>(RowTerms<T>{static_cast<const T*>(x.data()), n}, rows, n, o, FloatRef{},
                   native(stream));
  });
}

template <>
void sum_squares<DeviceType::cuda>(const TensorView& x, const TensorView& out,
                                   const Stream& stream) {
  const int64_t n = x.numel();
  float* o = static_cast<float*>(out.data());
  if (n == 0) {
    TFM_CUDA_CHECK(cudaMemsetAsync(o, 0, sizeof(float), native(stream)));
    return;
  }
  const unsigned blocks = grid_for(n) < kSquareBlocks ? grid_for(n) : kSquareBlocks;
  with_storage_type(x.dtype(), "sum_squares", [&](auto t) {
    using T = decltype(t);
    const T* xp = static_cast<const T*>(x.data());
    if (blocks == 1) {
      sum_squares_kernel<T><<<1, kThreads, 0, native(stream)>>>(xp, n, o);
      TFM_CHECK_LAUNCH();
      return;
    }
    Scratch partial(sizeof(float) * blocks, native(stream));
    sum_squares_kernel<T><<<blocks, kThreads, 0, native(stream)>>>(xp, n, partial.floats());
    TFM_CHECK_LAUNCH();
    sum_partials_kernel<<<1, kSquareBlocks, 0, native(stream)>>>(partial.floats(),
                                                                 static_cast<int>(blocks), o);
    TFM_CHECK_LAUNCH();
  });
}

template <>
void scale<DeviceType::cuda>(const TensorView& x, float alpha, const Stream& stream) {
  const int64_t n = x.numel();
  if (n == 0) return;
  with_storage_type(x.dtype(), "scale", [&](auto t) {
    using T = decltype(t);
    scale_kernel<T><<<grid_for(n), kThreads, 0, native(stream)>>>(static_cast<T*>(x.data()), n,
                                                                  alpha);
    TFM_CHECK_LAUNCH();
  });
}

}  // namespace tfm::ops::impl

// Storage types instantiated above, closed list: float, __nv_bfloat16, __half
// (through with_storage_type); sum_rows' out f32, bf16 or f16 through
// FloatRef, chosen at run time; partials and the sum of squares float.
