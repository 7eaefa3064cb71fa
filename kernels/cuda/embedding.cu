// CUDA embeddings (embedding.h): token lookup and learned/sinusoidal positions,
// forward and backward. Activations (out, x, dout, dx) are T in {f32, bf16,
// f16}; tables and their gradients may be T or f32 (FloatRef), arithmetic is
// f32. Rows are tokens; one thread per element, row-major, so a warp reads
// consecutive elements of one row.
#include "kernels/cuda/common.cuh"
#include "kernels/embedding.h"

namespace tfm::ops::cuda {
namespace {

// out[n, :] = scale * table[ids[n], :]; an id outside [0, V) writes zeros.
template <typename T>
__global__ void embedding_forward_kernel(const int32_t* ids, FloatRef table, int64_t vocab,
                                         int64_t d, float scale, T* out, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / d, col = i - n * d;
    const int64_t id = ids[n];
    const float v = id >= 0 && id < vocab ? scale * table.load(id * d + col) : 0.0f;
    out[i] = from_float<T>(v);
  }
}

// acc[ids[n], :] += scale * dout[n, :] into f32 acc. Repeated ids make
// several threads add into one row, so this uses atomicAdd: the order of the
// additions, and so the last bits of the result, can differ from run to run.
// Invalid ids add nothing, and neither do zeros: the padding of a batch
// (id 0, gradient 0, a quarter of the grid at the paper's batches) would
// otherwise make every one of its elements an atomic add into row 0.
template <typename T>
__global__ void embedding_backward_kernel(const int32_t* ids, const T* dout, float scale,
                                          float* acc, int64_t vocab, int64_t d, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / d, col = i - n * d;
    const int64_t id = ids[n];
    const float g = scale * to_float(dout[i]);
    if (id >= 0 && id < vocab && g != 0.0f) atomicAdd(acc + id * d + col, g);
  }
}

// dtable += acc, rounding once to dtable's 16-bit storage.
__global__ void add_accumulator_kernel(FloatRef dtable, const float* acc, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dtable.add(i, acc[i]);
}

// x[b, t, :] += table[offset + t, :], x (B, T, D); the offset read from
// offset_at where that is given, offset_at[b] with stride 1 (nothing added
// to an entry whose rows pass the table's p_len).
template <typename T>
__global__ void position_add_kernel(T* x, FloatRef table, int64_t t_len, int64_t d,
                                    int64_t offset, const int32_t* offset_at, int64_t offset_stride,
                                    int64_t p_len, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t td = i % (t_len * d);  // t * D + col
    int64_t at = offset;
    if (offset_at) {
      at = offset_at[i / (t_len * d) * offset_stride];  // b's offset, or the one offset (stride 0)
      if (at < 0 || at + t_len > p_len) continue;
    }
    x[i] = from_float<T>(to_float(x[i]) + table.load(at * d + td));
  }
}

// dtable[offset + t, :] += sum_b dx[b, t, :]: one thread per (t, col) sums
// over b in order, so the result is deterministic (no atomics).
template <typename T>
__global__ void position_backward_kernel(const T* dx, int64_t batch, int64_t t_len, int64_t d,
                                         int64_t offset, FloatRef dtable) {
  const int64_t per_b = t_len * d;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < per_b;
       i += int64_t(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int64_t b = 0; b < batch; ++b) sum += to_float(dx[b * per_b + i]);
    dtable.add(offset * d + i, sum);
  }
}

}  // namespace
}  // namespace tfm::ops::cuda

namespace tfm::ops::impl {
using namespace cuda;  // the helpers above

template <>
void embedding_forward<DeviceType::cuda>(const TensorView& ids, const TensorView& table,
                                         float scale, const TensorView& out, const Stream& stream) {
  const int64_t total = out.numel(), d = table.dim(1);
  if (total == 0) return;
  const FloatRef tab = float_ref(table, "embedding_forward");
  with_storage_type(out.dtype(), "embedding_forward", [&](auto t) {
    using T = decltype(t);
    embedding_forward_kernel<T><<<grid_for(total), kThreads, 0, native(stream)>>>(
        static_cast<const int32_t*>(ids.data()), tab, table.dim(0), d, scale,
        static_cast<T*>(out.data()), total);
    TFM_CHECK_LAUNCH();
  });
}

// An f32 dtable takes the atomic additions directly. A 16-bit one would
// round at every addition, so its sums go through an f32 scratch copy of
// the whole table (V x D floats, stream-ordered) and are rounded once; the
// model keeps f32 master gradients, so this is the uncommon case.
template <>
void embedding_backward<DeviceType::cuda>(const TensorView& ids, const TensorView& dout,
                                          float scale, const TensorView& dtable,
                                          const Stream& stream) {
  const int64_t total = dout.numel(), vocab = dtable.dim(0), d = dtable.dim(1);
  if (total == 0) return;
  const FloatRef grad = float_ref(dtable, "embedding_backward");
  const bool direct = dtable.dtype() == DType::f32;
  const int64_t table_size = vocab * d;
  Scratch scratch(direct ? 0 : sizeof(float) * static_cast<size_t>(table_size), native(stream));
  float* acc = direct ? static_cast<float*>(dtable.data()) : scratch.floats();
  if (!direct)
    TFM_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(float) * static_cast<size_t>(table_size),
                                   native(stream)));
  with_storage_type(dout.dtype(), "embedding_backward", [&](auto t) {
    using T = decltype(t);
    embedding_backward_kernel<T><<<grid_for(total), kThreads, 0, native(stream)>>>(
        static_cast<const int32_t*>(ids.data()), static_cast<const T*>(dout.data()), scale, acc,
        vocab, d, total);
    TFM_CHECK_LAUNCH();
  });
  if (!direct) {
    add_accumulator_kernel<<<grid_for(table_size), kThreads, 0, native(stream)>>>(grad, acc,
                                                                                 table_size);
    TFM_CHECK_LAUNCH();
  }
}

template <>
void position_add<DeviceType::cuda>(const TensorView& x, const TensorView& table, int64_t offset,
                                    const Stream& stream) {
  const int64_t total = x.numel();
  if (total == 0) return;
  const int64_t t_len = x.dim(1), d = x.dim(2);
  const FloatRef tab = float_ref(table, "position_add");
  with_storage_type(x.dtype(), "position_add", [&](auto t) {
    using T = decltype(t);
    position_add_kernel<T><<<grid_for(total), kThreads, 0, native(stream)>>>(
        static_cast<T*>(x.data()), tab, t_len, d, offset, nullptr, 0, table.dim(0), total);
    TFM_CHECK_LAUNCH();
  });
}

template <>
void position_add_at<DeviceType::cuda>(const TensorView& x, const TensorView& table,
                                       const TensorView& offset, const Stream& stream) {
  const int64_t total = x.numel(), t_len = x.dim(1), d = x.dim(2);
  const FloatRef tab = float_ref(table, "position_add_at");
  with_storage_type(x.dtype(), "position_add_at", [&](auto t) {
    using T = decltype(t);
    position_add_kernel<T><<<grid_for(total), kThreads, 0, native(stream)>>>(
        static_cast<T*>(x.data()), tab, t_len, d, 0, offset.data_as<int32_t>(), offset.numel() > 1 ? 1 : 0,
        table.dim(0), total);
    TFM_CHECK_LAUNCH();
  });
}

template <>
void position_backward<DeviceType::cuda>(const TensorView& dx, int64_t offset,
                                         const TensorView& dtable, const Stream& stream) {
  const int64_t batch = dx.dim(0), t_len = dx.dim(1), d = dx.dim(2);
  if (t_len * d == 0) return;
  const FloatRef grad = float_ref(dtable, "position_backward");
  with_storage_type(dx.dtype(), "position_backward", [&](auto t) {
    using T = decltype(t);
    position_backward_kernel<T><<<grid_for(t_len * d), kThreads, 0, native(stream)>>>(
        static_cast<const T*>(dx.data()), batch, t_len, d, offset, grad);
    TFM_CHECK_LAUNCH();
  });
}

}  // namespace tfm::ops::impl

// Storage types instantiated above, closed list: activations float,
// __nv_bfloat16, __half (through with_storage_type); tables and table
// gradients f32, bf16 or f16 through FloatRef, chosen at run time;
// embedding_backward accumulates in float.
