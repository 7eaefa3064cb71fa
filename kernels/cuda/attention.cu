// CUDA attention helpers (attention.h): the head split/merge permutation and the
// masked softmax, forward and backward. Storage f32, bf16 or f16; softmax
// statistics in f32. A softmax row (one query) belongs to one warp (Tk <=
// kWarpRowMax) or one block; the mask comes from k_lengths and causality,
// never from a mask tensor.
#include "kernels/attention.h"
#include "kernels/cuda/common.cuh"

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

// Piece (b, h, t) of heads (B, H, L, X) <-> rows[offsets[b] + t, h X ..],
// in packs of kN elements (16 bytes where the tensors allow, common.cuh):
// one thread a pack, so that a warp moves 512 bytes in one load and one
// store instead of a row of X 2-byte elements in several (the element-wise
// version ran at a quarter of HBM bandwidth). unpack writes zeros at
// t >= len_b. 32-bit indices: the launch checks that the packs fit.
template <typename T, int kN, bool kUnpack>
__global__ void move_heads_kernel(T* rows, const int32_t* offsets, T* heads, uint32_t nh,
                                  uint32_t nl, uint32_t packs_per_piece, uint32_t packs,
                                  int64_t width) {
  using P = Pack<T, kN>;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < packs; i += gridDim.x * blockDim.x) {
    const uint32_t piece = i / packs_per_piece, k = i - piece * packs_per_piece;
    const uint32_t t = piece % nl, bh = piece / nl;
    const uint32_t h = bh % nh, b = bh / nh;
    const int32_t first = offsets[b], len = offsets[b + 1] - first;
    P* head = reinterpret_cast<P*>(heads) + i;
    if (static_cast<int32_t>(t) >= len) {
      if constexpr (kUnpack) {
        P zero;
#pragma unroll
        for (int j = 0; j < kN; ++j) zero.v[j] = from_float<T>(0.0f);
        *head = zero;
      }
      continue;
    }
    P* row = reinterpret_cast<P*>(rows + (int64_t(first) + t) * width) + h * packs_per_piece + k;
    if constexpr (kUnpack) *head = *row;
    else *row = *head;
  }
}

template <bool kUnpack>
void move_heads(const TensorView& rows, const TensorView& offsets, const TensorView& heads,
                int64_t col, const Stream& stream, const char* op) {
  const int64_t nb = heads.dim(0), nh = heads.dim(1), nl = heads.dim(2), nx = heads.dim(3);
  if (nb * nh * nl == 0 || nx == 0) return;
  with_storage_type(heads.dtype(), op, [&](auto t) {
    using T = decltype(t);
    constexpr int kN = kPack16<T>;
    T* r = static_cast<T*>(rows.data()) + col;
    T* h = static_cast<T*>(heads.data());
    const int64_t width = rows.dim(1);
    const bool packed = nx % kN == 0 && packable<kN>(width, static_cast<const T*>(r), static_cast<const T*>(h));
    const int64_t n = packed ? kN : 1, packs = nb * nh * nl * (nx / n);
    if (packs >= (int64_t{1} << 31))
      throw Error(std::string(op) + ": " + std::to_string(nb * nh * nl) + " heads of " + std::to_string(nx) +
                  " elements are over 2^31 moves");
    auto kernel = packed ? move_heads_kernel<T, kN, kUnpack> : move_heads_kernel<T, 1, kUnpack>;
    kernel<<<grid_for(packs), kThreads, 0, native(stream)>>>(
        r, static_cast<const int32_t*>(offsets.data()), h, static_cast<uint32_t>(nh),
        static_cast<uint32_t>(nl), static_cast<uint32_t>(nx / n), static_cast<uint32_t>(packs), width);
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

// Elements [0, tk) of a short row stored from f(e), in packs (e is a
// constant once the loops unroll: f may index register arrays with it).
template <typename T, int kMax, typename F>
__device__ __forceinline__ void store_short_row(T* row, int tk, F f) {
  constexpr int kN = kPack16<T>;
  using P = Pack<T, kN>;
#pragma unroll
  for (int c = 0; c < kMax / kN; ++c)
    if (c * kN < tk) {
      P v;
#pragma unroll
      for (int j = 0; j < kN; ++j) v.v[j] = from_float<T>(f(c * kN + j));
      reinterpret_cast<P*>(row)[c] = v;
    }
}

// Short rows (Tk <= kMax, a multiple of kN: the padded tiles of sentences of
// up to 64 tokens) by a thread each, from registers: the warp-per-row
// kernels above spent more on a row's index arithmetic and shuffles than on
// its 64 bytes (about 7x HBM's time at Tk = 32). The same masks and
// formulas; the row's sums in one thread's order.
template <typename T, int kMax>
__global__ void short_softmax_forward_kernel(const T* scores, const int32_t* k_lengths, bool causal,
                                             T* probs, uint32_t rows, uint32_t heads_tq, uint32_t tq,
                                             int tk) {
  constexpr int kN = kPack16<T>;
  using P = Pack<T, kN>;
  for (uint32_t row = blockIdx.x * blockDim.x + threadIdx.x; row < rows;
       row += gridDim.x * blockDim.x) {
    int visible = min(k_lengths[row / heads_tq], tk);
    if (causal) visible = min(visible, static_cast<int>(row % tq) + 1);
    const P* in = reinterpret_cast<const P*>(scores + int64_t(row) * tk);
    float x[kMax];
#pragma unroll
    for (int c = 0; c < kMax / kN; ++c)
      if (c * kN < tk) {
        const P v = in[c];
#pragma unroll
        for (int j = 0; j < kN; ++j) x[c * kN + j] = to_float(v.v[j]);
      }
    float m = -INFINITY;
#pragma unroll
    for (int e = 0; e < kMax; ++e)
      if (e < visible) m = fmaxf(m, x[e]);
    float sum = 0.0f;
#pragma unroll
    for (int e = 0; e < kMax; ++e) {
      x[e] = e < visible ? expf(x[e] - m) : 0.0f;
      sum += x[e];
    }
    const float inv = visible > 0 ? 1.0f / sum : 0.0f;
    store_short_row<T, kMax>(probs + int64_t(row) * tk, tk, [&](int e) { return x[e] * inv; });
  }
}

template <typename T, int kMax>
__global__ void short_softmax_backward_kernel(const T* probs, const T* dprobs, T* dscores, uint32_t rows,
                                              int tk) {
  constexpr int kN = kPack16<T>;
  using P = Pack<T, kN>;
  for (uint32_t row = blockIdx.x * blockDim.x + threadIdx.x; row < rows;
       row += gridDim.x * blockDim.x) {
    const P* p = reinterpret_cast<const P*>(probs + int64_t(row) * tk);
    const P* dp = reinterpret_cast<const P*>(dprobs + int64_t(row) * tk);
    P pv[kMax / kN], dv[kMax / kN];  // in storage form: half the registers of floats in 16 bits
    float dot = 0.0f;
#pragma unroll
    for (int c = 0; c < kMax / kN; ++c)
      if (c * kN < tk) {
        pv[c] = p[c];
        dv[c] = dp[c];
#pragma unroll
        for (int j = 0; j < kN; ++j) dot += to_float(pv[c].v[j]) * to_float(dv[c].v[j]);
      }
    store_short_row<T, kMax>(dscores + int64_t(row) * tk, tk, [&](int e) {
      return to_float(pv[e / kN].v[e % kN]) * (to_float(dv[e / kN].v[e % kN]) - dot);
    });
  }
}

// Calls f(std::integral_constant<int, kMax>) for short packed rows of tk
// elements (all of ptrs aligned to packs), and returns whether it did.
template <typename T, typename F, typename... Ptr>
bool with_short_rows(int64_t rows, int64_t tk, F&& f, const Ptr*... ptrs) {
  constexpr int kN = kPack16<T>;
  if (tk > 64 || rows >= (int64_t{1} << 31) || !packable<kN>(tk, ptrs...)) return false;
  if (tk <= 32) f(std::integral_constant<int, 32>{});
  else f(std::integral_constant<int, 64>{});
  return true;
}

}  // namespace
}  // namespace tfm::ops::cuda

namespace tfm::ops::impl {
using namespace cuda;  // the helpers above

template <>
void permute_0213<DeviceType::cuda>(const TensorView& x, const TensorView& y,
                                    const Stream& stream) {
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

template <>
void unpack_heads<DeviceType::cuda>(const TensorView& rows, const TensorView& offsets,
                                    const TensorView& heads, int64_t col, const Stream& stream) {
  move_heads<true>(rows, offsets, heads, col, stream, "unpack_heads");
}

template <>
void pack_heads<DeviceType::cuda>(const TensorView& heads, const TensorView& offsets,
                                  const TensorView& rows, int64_t col, const Stream& stream) {
  move_heads<false>(rows, offsets, heads, col, stream, "pack_heads");
}

template <>
void masked_softmax_forward<DeviceType::cuda>(const TensorView& scores, const TensorView& k_lengths,
                                              bool causal, const TensorView& probs,
                                              const Stream& stream) {
  const int64_t heads = scores.dim(1), tq = scores.dim(2), tk = scores.dim(3);
  const int64_t rows = scores.dim(0) * heads * tq;
  if (rows == 0 || tk == 0) return;
  with_storage_type(scores.dtype(), "masked_softmax_forward", [&](auto t) {
    using T = decltype(t);
    const T* x = static_cast<const T*>(scores.data());
    T* y = static_cast<T*>(probs.data());
    const int32_t* lengths = static_cast<const int32_t*>(k_lengths.data());
    const auto short_rows = [&](auto max) {
      short_softmax_forward_kernel<T, decltype(max)::value><<<grid_for(rows), kThreads, 0, native(stream)>>>(
          x, lengths, causal, y, static_cast<uint32_t>(rows), static_cast<uint32_t>(heads * tq),
          static_cast<uint32_t>(tq), static_cast<int>(tk));
      TFM_CHECK_LAUNCH();
    };
    if (with_short_rows<T>(rows, tk, short_rows, x, static_cast<const T*>(y))) return;
    with_row_shape(rows, tk, [&](auto block_per_row, dim3 grid, dim3 block) {
      masked_softmax_forward_kernel<T, decltype(block_per_row)::value>
          <<<grid, block, 0, native(stream)>>>(
              static_cast<const T*>(scores.data()), static_cast<const int32_t*>(k_lengths.data()),
              causal, static_cast<T*>(probs.data()), rows, heads * tq, tq, tk);
      TFM_CHECK_LAUNCH();
    });
  });
}

template <>
void masked_softmax_backward<DeviceType::cuda>(const TensorView& probs, const TensorView& dprobs,
                                               const TensorView& dscores, const Stream& stream) {
  const int64_t tk = probs.dim(-1), rows = tk == 0 ? 0 : probs.numel() / tk;
  if (rows == 0) return;
  with_storage_type(probs.dtype(), "masked_softmax_backward", [&](auto t) {
    using T = decltype(t);
    const T* p = static_cast<const T*>(probs.data());
    const T* dp = static_cast<const T*>(dprobs.data());
    T* ds = static_cast<T*>(dscores.data());
    const auto short_rows = [&](auto max) {
      short_softmax_backward_kernel<T, decltype(max)::value><<<grid_for(rows), kThreads, 0, native(stream)>>>(
          p, dp, ds, static_cast<uint32_t>(rows), static_cast<int>(tk));
      TFM_CHECK_LAUNCH();
    };
    if (with_short_rows<T>(rows, tk, short_rows, p, dp, static_cast<const T*>(ds))) return;
    with_row_shape(rows, tk, [&](auto block_per_row, dim3 grid, dim3 block) {
      masked_softmax_backward_kernel<T, decltype(block_per_row)::value>
          <<<grid, block, 0, native(stream)>>>(static_cast<const T*>(probs.data()),
                                               static_cast<const T*>(dprobs.data()),
                                               static_cast<T*>(dscores.data()), rows, tk);
      TFM_CHECK_LAUNCH();
    });
  });
}

}  // namespace tfm::ops::impl

// Storage types instantiated above, closed list: float, __nv_bfloat16, __half
// (through with_storage_type), softmax kernels each with a warp and a block
// per row; k_lengths int32.
