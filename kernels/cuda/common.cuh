// Shared pieces of the CUDA ops: storage types, float conversion, dtype
// dispatch, the launch shapes of elementwise and row kernels, run-time typed
// parameter pointers (FloatRef), warp/block reductions, deterministic column
// sums and stream-ordered scratch memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/check.h"
#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"

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

// ----------------------------------------------------------- packed access
// kN consecutive elements loaded or stored by one instruction: 16 bytes for
// kN = 16 / sizeof(T) (8 bf16 or f16, 4 f32). Memory-bound kernels move 2-
// byte elements one at a time at well under HBM bandwidth; packs of 16
// bytes reach most of it. A kernel takes packs where the tensor allows
// (packable), and single elements (kN = 1) elsewhere.
template <typename T, int kN>
struct alignas(sizeof(T) * kN) Pack {
  T v[kN];
};

template <typename T>
inline constexpr int kPack16 = static_cast<int>(16 / sizeof(T));

// Whether n elements split into packs of kN and every pointer (null ones
// aside) is aligned to its pack.
template <int kN, typename... P>
bool packable(int64_t n, const P*... ptrs) {
  const bool aligned =
      ((ptrs == nullptr || reinterpret_cast<uintptr_t>(ptrs) % (sizeof(P) * kN) == 0) && ...);
  return n % kN == 0 && aligned;
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

// A float tensor whose storage type (f32, bf16 or f16) is known only at run
// time: parameters and parameter gradients, which may be f32 while the
// activations are 16-bit (ops.h). The switch is uniform across a launch, so
// it costs a well-predicted branch, not divergence, and saves instantiating
// every kernel for every (activation, parameter) pair of types.
struct FloatRef {
  void* data = nullptr;
  DType dtype = DType::f32;

  __device__ __forceinline__ float load(int64_t i) const {
    switch (dtype) {
      case DType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(data)[i]);
      case DType::f16: return __half2float(static_cast<const __half*>(data)[i]);
      default: return static_cast<const float*>(data)[i];
    }
  }
  __device__ __forceinline__ void store(int64_t i, float v) const {
    switch (dtype) {
      case DType::bf16: static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16_rn(v); break;
      case DType::f16: static_cast<__half*>(data)[i] = __float2half_rn(v); break;
      default: static_cast<float*>(data)[i] = v; break;
    }
  }
  // data[i] += v by one thread that owns element i.
  __device__ __forceinline__ void add(int64_t i, float v) const { store(i, load(i) + v); }
};

inline FloatRef float_ref(const TensorView& t, const char* op) {
  if (t.dtype() != DType::f32 && t.dtype() != DType::bf16 && t.dtype() != DType::f16)
    unsupported_dtype(op, t.dtype());
  return FloatRef{t.data(), t.dtype()};
}

// ------------------------------------------------------------ reductions
// Fixed-order trees: the same inputs give the same bits on every run.

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Reduces v over a one-dimensional block (blockDim.x a multiple of 32, at
// most 1024) with `op`, a warp reduction such as warp_sum; every thread gets
// the result. `scratch` is 32 floats of shared memory; back-to-back calls
// may share it (the leading barrier keeps a fast warp from overwriting what
// a slow one still reads). Every thread of the block must call it.
template <typename WarpOp>
__device__ __forceinline__ float block_reduce(float v, float* scratch, WarpOp op, float identity) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  v = op(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < (blockDim.x >> 5) ? scratch[lane] : identity;
  return op(v);
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
  return block_reduce(v, scratch, [](float x) { return warp_sum(x); }, 0.0f);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  return block_reduce(v, scratch, [](float x) { return warp_max(x); }, -INFINITY);
}

// ------------------------------------------------- online softmax statistics
// A running (max, sum of exp(x - max)) that one pass over a row builds: each
// thread pushes its elements, rescaling its sum when the max grows; threads
// combine by fixed trees.

struct MaxSum {
  float m = -INFINITY;  // running maximum
  float s = 0.0f;       // sum of exp(x - m)
};

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};  // both empty: avoid exp(-inf - -inf)
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ MaxSum push(MaxSum a, float x) {
  if (x > a.m) return {x, a.s * expf(a.m - x) + 1.0f};
  if (x == -INFINITY) return a;  // adds exp(-inf) = 0; avoids -inf - -inf
  return {a.m, a.s + expf(x - a.m)};
}

// Before a pack's terms are added: the running maximum raised to the
// pack's own maximum `top`, the sum rescaled once for the pack instead of
// once an element (exp(-inf) = 0 rescales an empty sum to 0). The terms
// are then exp(x - a.m), none while a.m is -inf (exp(-inf - -inf) is NaN).
__device__ __forceinline__ MaxSum raise_max(MaxSum a, float top) {
  if (top > a.m) return {top, a.s * expf(a.m - top)};
  return a;
}

__device__ __forceinline__ MaxSum warp_max_sum(MaxSum v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = combine(v, {__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)});
  return v;
}

// Over a one-dimensional block; every thread gets the result (as block_reduce).
__device__ __forceinline__ MaxSum block_max_sum(MaxSum v, float* scratch_m, float* scratch_s) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  v = warp_max_sum(v);
  __syncthreads();
  if (lane == 0) {
    scratch_m[warp] = v.m;
    scratch_s[warp] = v.s;
  }
  __syncthreads();
  v = lane < (blockDim.x >> 5) ? MaxSum{scratch_m[lane], scratch_s[lane]} : MaxSum{};
  return warp_max_sum(v);
}

// A row reduction for kernels whose rows belong either to one warp
// (kBlockPerRow false) or to a whole one-dimensional block (true).
template <bool kBlockPerRow>
__device__ __forceinline__ float row_sum(float v, float* scratch) {
  if constexpr (kBlockPerRow) return block_sum(v, scratch);
  else return warp_sum(v);
}

template <bool kBlockPerRow>
__device__ __forceinline__ float row_max(float v, float* scratch) {
  if constexpr (kBlockPerRow) return block_max(v, scratch);
  else return warp_max(v);
}

// Launch shape of row kernels: a warp per row for rows of at most
// kWarpRowMax elements (kRowsPerBlock rows per block, blockDim (32, 8)),
// a block of kThreads per row beyond.
constexpr int64_t kWarpRowMax = 1024;
constexpr int kRowsPerBlock = 8;

// Calls f(std::bool_constant<kBlockPerRow>{}, grid, block) for `rows` rows of
// n elements. In a kernel: row = kBlockPerRow ? blockIdx.x : blockIdx.x *
// blockDim.y + threadIdx.y; its threads are threadIdx.x, stride blockDim.x.
template <typename F>
void with_row_shape(int64_t rows, int64_t n, F&& f) {
  if (n <= kWarpRowMax)
    f(std::false_type{}, dim3(static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock)),
      dim3(32, kRowsPerBlock));
  else
    f(std::true_type{}, dim3(static_cast<unsigned>(rows)), dim3(kThreads));
}

template <bool kBlockPerRow>
__device__ __forceinline__ int64_t row_of_thread() {
  if constexpr (kBlockPerRow) return blockIdx.x;
  else return int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
}

// Stream-ordered scratch memory from the device's default pool
// (cudaMallocAsync): released on the stream after the kernels queued before
// the destructor, so the host never waits. For small temporaries only.
class Scratch {
 public:
  Scratch(size_t bytes, cudaStream_t stream) : stream_(stream) {
    if (bytes > 0) TFM_CUDA_CHECK(cudaMallocAsync(&data_, bytes, stream));
  }
  ~Scratch() {
    if (data_) cudaFreeAsync(data_, stream_);  // a failure resurfaces at the next check
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  float* floats() const { return static_cast<float*>(data_); }

 private:
  void* data_ = nullptr;
  cudaStream_t stream_;
};

// ------------------------------------------------------- column reductions
// out_k[c] += sum_r term_k(r, c) over a row-major (R, N) domain, for k <
// kOut, deterministically and without atomics. Stage 1: blocks of 32 columns
// x kColumnLanes row lanes each sum one chunk of rows into per-chunk
// partials; stage 2 adds the chunks in order into out. With one chunk,
// stage 1 adds into out directly. `Terms` is a functor with
//   __device__ void operator()(int64_t r, int64_t c, float (&acc)[kOut]) const
// that adds row r's terms for column c into acc.
constexpr int kColumnLanes = 16;

template <int kOut, typename Terms>
__global__ void column_partials_kernel(Terms terms, int64_t rows, int64_t cols,
                                       int64_t rows_per_chunk, float* partial, FloatRef out0,
                                       FloatRef out1) {
  __shared__ float tile[kOut][kColumnLanes][33];
  const int64_t col = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const int64_t chunk = blockIdx.y, chunks = gridDim.y;
  const int64_t r0 = chunk * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  float acc[kOut];
#pragma unroll
  for (int k = 0; k < kOut; ++k) acc[k] = 0.0f;
  if (col < cols)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kColumnLanes) terms(r, col, acc);
#pragma unroll
  for (int k = 0; k < kOut; ++k) tile[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y != 0 || col >= cols) return;
#pragma unroll
  for (int k = 0; k < kOut; ++k) {
    float sum = 0.0f;
    for (int lane = 0; lane < kColumnLanes; ++lane) sum += tile[k][lane][threadIdx.x];
    if (partial) partial[(k * chunks + chunk) * cols + col] = sum;
    else (k == 0 ? out0 : out1).add(col, sum);
  }
}

template <int kOut>
__global__ void column_finish_kernel(const float* partial, int64_t chunks, int64_t cols,
                                     FloatRef out0, FloatRef out1) {
  for (int64_t col = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; col < cols;
       col += int64_t(gridDim.x) * blockDim.x)
#pragma unroll
    for (int k = 0; k < kOut; ++k) {
      float sum = 0.0f;
      for (int64_t chunk = 0; chunk < chunks; ++chunk)
        sum += partial[(k * chunks + chunk) * cols + col];
      (k == 0 ? out0 : out1).add(col, sum);
    }
}

// Chunks enough to give the GPU about 1024 blocks, each of at least 32 rows.
template <int kOut, typename Terms>
void column_sums(const Terms& terms, int64_t rows, int64_t cols, FloatRef out0, FloatRef out1,
                 cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  const int64_t col_blocks = (cols + 31) / 32;
  const int64_t by_blocks = (1024 + col_blocks - 1) / col_blocks, by_rows = (rows + 31) / 32;
  int64_t chunks = by_blocks < by_rows ? by_blocks : by_rows;
  if (chunks < 1) chunks = 1;
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;  // no empty chunk
  Scratch partial(chunks > 1 ? sizeof(float) * size_t(kOut * chunks * cols) : 0, stream);
  column_partials_kernel<kOut><<<dim3(unsigned(col_blocks), unsigned(chunks)),
                                 dim3(32, kColumnLanes), 0, stream>>>(
      terms, rows, cols, rows_per_chunk, partial.floats(), out0, out1);
  TFM_CHECK_LAUNCH();
  if (chunks > 1) {
    column_finish_kernel<kOut><<<grid_for(cols), kThreads, 0, stream>>>(partial.floats(), chunks,
                                                                        cols, out0, out1);
    TFM_CHECK_LAUNCH();
  }
}

// C (rows, n) = act(C + bias): the GEMM epilogue when cuBLASLt cannot fuse it.
void bias_relu_inplace(const TensorView& c, int64_t rows, int64_t n, const TensorView& bias,
                       bool relu, cudaStream_t stream);

}  // namespace tfm::ops::cuda
