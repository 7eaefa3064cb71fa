// CUDA attention helpers (ops.h): the head split/merge permutation and the
// masked softmax, forward and backward. Storage f32, bf16 or f16; softmax
// statistics in f32. A softmax row (one query) belongs to one warp (Tk <=
// kWarpRowMax) or one block; the mask comes from k_lengths and causality,
// never from a mask tensor.
#include "kernels/cuda/common.cuh"
#include "kernels/detail.h"

namespace tfm::ops::cuda {
namespace {

// y[a, c, b, :] = x[a, b, c, :]: blockDim (32, 8), a warp copies one row of
// D contiguous elements; rows in grid-stride order.
template <typename T>
__global__ void permute_0213_kernel(const T* x, T* y, int64_t na, int64_t nb, int64_t nc,
                                    int64_t nd) {
  const int64_t rows = na * nc * nb;
  for (int64_t r = int64_t(blockIdx.x) * blockDim.y + threadIdx.y; r < rows;
       r += int64_t(gridDim.x) * blockDim.y) {
    // r = (a * C + c) * B + b indexes y's rows; x's row is (a * B + b) * C + c.
    const int64_t b = r % nb, ac = r / nb;
    const int64_t c = ac % nc, a = ac / nc;
    const T* src = x + ((a * nb + b) * nc + c) * nd;
    T* dst = y + r * nd;
    for (int64_t k = threadIdx.x; k < nd; k += blockDim.x) dst[k] = src[k];
  }
}

// Piece (b, h, t) of heads (B, H, L, X) <-> rows[offsets[b] + t, h X ..]:
// blockDim (32, 8), a warp moves one piece; unpack writes zeros at t >= len_b.
template <typename T, bool kUnpack>
__global__ void move_heads_kernel(T* rows, const int32_t* offsets, T* heads, int64_t nb,
                                  int64_t nh, int64_t nl, int64_t nx, int64_t width) {
  const int64_t pieces = nb * nh * nl;
  for (int64_t p = int64_t(blockIdx.x) * blockDim.y + threadIdx.y; p < pieces;
       p += int64_t(gridDim.x) * blockDim.y) {
    const int64_t t = p % nl, bh = p / nl;
    const int64_t h = bh % nh, b = bh / nh;
    const int64_t first = offsets[b], len = offsets[b + 1] - first;
    T* head = heads + p * nx;
    if (t >= len) {
      if (kUnpack)
        for (int64_t k = threadIdx.x; k < nx; k += blockDim.x) head[k] = from_float<T>(0.0f);
      continue;
    }
    T* row = rows + (first + t) * width + h * nx;
    for (int64_t k = threadIdx.x; k < nx; k += blockDim.x) {
      if (kUnpack) head[k] = row[k];
      else row[k] = head[k];
    }
  }
}

template <bool kUnpack>
void move_heads(const TensorView& rows, const TensorView& offsets, const TensorView& heads,
                int64_t col, const Stream& stream, const char* op) {
  const int64_t nb = heads.dim(0), nh = heads.dim(1), nl = heads.dim(2), nx = heads.dim(3);
  const int64_t pieces = nb * nh * nl;
  if (pieces == 0 || nx == 0) return;
  const int64_t blocks = (pieces + kRowsPerBlock - 1) / kRowsPerBlock;
  const unsigned grid = static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
  with_storage_type(heads.dtype(), op, [&](auto t) {
    using T = decltype(t);
    move_heads_kernel<T, kUnpack><<<grid, dim3(32, kRowsPerBlock), 0, native(stream)>>>(
        static_cast<T*>(rows.data()) + col, static_cast<const int32_t*>(offsets.data()),
        static_cast<T*>(heads.data()), nb, nh, nl, nx, rows.dim(1));
    TFM_CHECK_LAUNCH();
  });
}

// Row (b, h, i) of (B, H, Tq, Tk) sees keys j < visible = min(k_lengths[b],
// Tk, causal ? i + 1 : Tk); the others get exactly 0, and a row that sees
// none is all 0. probs may be scores: each thread reads its elements before
// it writes them, after every read of the row's reductions.
template <typename T, bool kBlockPerRow>
__global__ void masked_softmax_forward_kernel(const T* scores, const int32_t* k_lengths, bool causal,
                                       T* probs, int64_t rows, int64_t heads_tq, int64_t tq,
                                       int64_t tk) {
  __shared__ float scratch[32];
  const int64_t row = row_of_thread<kBlockPerRow>();
  if (row >= rows) return;  // a whole warp; never in block mode
  const int64_t base = row * tk;
  const int lane = threadIdx.x, stride = blockDim.x;
  int64_t visible = k_lengths[row / heads_tq];
  if (visible > tk) visible = tk;
  if (causal && visible > row % tq + 1) visible = row % tq + 1;

  float m = -INFINITY;
  for (int64_t j = lane; j < visible; j += stride) m = fmaxf(m, to_float(scores[base + j]));
  m = row_max<kBlockPerRow>(m, scratch);
  float sum = 0.0f;
  for (int64_t j = lane; j < visible; j += stride) sum += expf(to_float(scores[base + j]) - m);
  sum = row_sum<kBlockPerRow>(sum, scratch);
  const float inv = visible > 0 ? 1.0f / sum : 0.0f;
  for (int64_t j = lane; j < tk; j += stride)
    probs[base + j] =
        from_float<T>(j < visible ? expf(to_float(scores[base + j]) - m) * inv : 0.0f);
}

// dscores = probs * (dprobs - sum_j probs * dprobs); dscores may be dprobs.
template <typename T, bool kBlockPerRow>
__global__ void masked_softmax_backward_kernel(const T* probs, const T* dprobs, T* dscores, int64_t rows,
                                        int64_t tk) {
  __shared__ float scratch[32];
  const int64_t row = row_of_thread<kBlockPerRow>();
  if (row >= rows) return;
  const int64_t base = row * tk;
  const int lane = threadIdx.x, stride = blockDim.x;
  float dot = 0.0f;
  for (int64_t j = lane; j < tk; j += stride)
    dot += to_float(probs[base + j]) * to_float(dprobs[base + j]);
  dot = row_sum<kBlockPerRow>(dot, scratch);
  for (int64_t j = lane; j < tk; j += stride) {
    const float p = to_float(probs[base + j]);
    dscores[base + j] = from_float<T>(p * (to_float(dprobs[base + j]) - dot));
  }
}

}  // namespace

void permute_0213(const TensorView& x, const TensorView& y, const Stream& stream) {
  const int64_t na = x.dim(0), nb = x.dim(1), nc = x.dim(2), nd = x.dim(3);
  const int64_t rows = na * nb * nc;
  if (rows == 0 || nd == 0) return;
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const unsigned grid = static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
  with_storage_type(x.dtype(), "permute_0213", [&](auto t) {
    using T = decltype(t);
    permute_0213_kernel<T><<<grid, dim3(32, kRowsPerBlock), 0, native(stream)>>>(
        static_cast<const T*>(x.data()), static_cast<T*>(y.data()), na, nb, nc, nd);
    TFM_CHECK_LAUNCH();
  });
}

void unpack_heads(const TensorView& rows, const TensorView& offsets, const TensorView& heads,
                  int64_t col, const Stream& stream) {
  move_heads<true>(rows, offsets, heads, col, stream, "unpack_heads");
}

void pack_heads(const TensorView& heads, const TensorView& offsets, const TensorView& rows,
                int64_t col, const Stream& stream) {
  move_heads<false>(rows, offsets, heads, col, stream, "pack_heads");
}

void masked_softmax_forward(const TensorView& scores, const TensorView& k_lengths, bool causal,
                            const TensorView& probs, const Stream& stream) {
  const int64_t heads = scores.dim(1), tq = scores.dim(2), tk = scores.dim(3);
  const int64_t rows = scores.dim(0) * heads * tq;
  if (rows == 0 || tk == 0) return;
  with_storage_type(scores.dtype(), "masked_softmax_forward", [&](auto t) {
    using T = decltype(t);
    with_row_shape(rows, tk, [&](auto block_per_row, dim3 grid, dim3 block) {
      masked_softmax_forward_kernel<T, decltype(block_per_row)::value>
          <<<grid, block, 0, native(stream)>>>(
              static_cast<const T*>(scores.data()), static_cast<const int32_t*>(k_lengths.data()),
              causal, static_cast<T*>(probs.data()), rows, heads * tq, tq, tk);
      TFM_CHECK_LAUNCH();
    });
  });
}

void masked_softmax_backward(const TensorView& probs, const TensorView& dprobs, const TensorView& dscores,
                             const Stream& stream) {
  const int64_t tk = probs.dim(-1), rows = tk == 0 ? 0 : probs.numel() / tk;
  if (rows == 0) return;
  with_storage_type(probs.dtype(), "masked_softmax_backward", [&](auto t) {
    using T = decltype(t);
    with_row_shape(rows, tk, [&](auto block_per_row, dim3 grid, dim3 block) {
      masked_softmax_backward_kernel<T, decltype(block_per_row)::value>
          <<<grid, block, 0, native(stream)>>>(static_cast<const T*>(probs.data()),
                                               static_cast<const T*>(dprobs.data()),
                                               static_cast<T*>(dscores.data()), rows, tk);
      TFM_CHECK_LAUNCH();
    });
  });
}

}  // namespace tfm::ops::cuda

// Storage types instantiated above, closed list: float, __nv_bfloat16, __half
// (through with_storage_type), softmax kernels each with a warp and a block
// per row; k_lengths int32.
