// CUDA decoding ops (decode.h): attention over gathered keys and the
// top-k log-softmax (one pass over the vocabulary for k <= 16). Storage
// f32, bf16 or f16; every sum in f32 in a fixed order, so a row's bits do
// not depend on the other rows of the launch.
// Indices out of range are made harmless (ops.h): an index outside the pool
// or a group outside [0, G) counts as an empty key, a length is clamped.
#include "kernels/cuda/common.cuh"
#include "kernels/decode.h"

namespace tfm::ops::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

// The key list a row reads: group g's entries and length (clamped to
// [0, list_len]); empty for a group outside [0, G).
struct GatherList {
  int64_t len = 0;
  const int32_t* idx = nullptr;
};

__device__ __forceinline__ GatherList gather_list(const int32_t* index, const int32_t* lengths,
                                                  int32_t g, int64_t list_len, int64_t ngroups) {
  if (g < 0 || g >= ngroups) return {};
  const int64_t len = lengths[g] < 0 ? 0 : (lengths[g] > list_len ? list_len : lengths[g]);
  return {len, index + int64_t(g) * list_len};
}

// By a warp, over scores w[0, len) whose maximum is mx (-inf: an empty
// key): w[j] = exp(w[j] - mx), and 1 / their sum (0 when none counts). The
// warp's lanes may read any w[j] afterwards.
__device__ __forceinline__ float exp_in_place(float* w, int64_t len, float mx, int lane) {
  __syncwarp();
  float sum = 0.0f;
  for (int64_t j = lane; j < len; j += 32) {
    const float e = w[j] == -INFINITY ? 0.0f : expf(w[j] - mx);
    w[j] = e;
    sum += e;
  }
  sum = warp_sum(sum);
  __syncwarp();
  return sum > 0.0f ? 1.0f / sum : 0.0f;
}

// One warp per (row, head). Scores: the warp reduces each key's dot product
// (lanes over K) into shared memory, one list entry at a time; softmax
// statistics over the list by warp trees; the output: lanes over E, keys in
// list order.
template <typename T>
__global__ void attention_gather_kernel(const T* q, const T* keys, const T* values,
                                        const int32_t* index, const int32_t* lengths,
                                        const int32_t* groups, int64_t rows, int64_t nh,
                                        int64_t nk, int64_t ne, int64_t list_len, int64_t pool,
                                        int64_t ngroups, float scale, T* out, float* probs) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + warp;
  if (r >= rows * nh) return;  // a whole warp
  float* w = smem + int64_t(warp) * list_len;
  const int64_t h = r % nh;
  const GatherList list = gather_list(index, lengths, groups[r / nh], list_len, ngroups);
  const int64_t len = list.len;
  const int32_t* idx = list.idx;
  const T* qr = q + r * nk;
  float mx = -INFINITY;
  for (int64_t j = 0; j < len; ++j) {
    const int64_t p = idx[j];
    float part = 0.0f;
    if (p >= 0 && p < pool) {
      const T* kr = keys + (p * nh + h) * nk;
      for (int64_t c = lane; c < nk; c += 32) part += to_float(qr[c]) * to_float(kr[c]);
    }
    const float s = (p >= 0 && p < pool) ? scale * warp_sum(part) : -INFINITY;
    if (lane == 0) w[j] = s;
    mx = fmaxf(mx, s);
  }
  const float inv = exp_in_place(w, len, mx, lane);
  for (int64_t c = lane; c < ne; c += 32) {
    float acc = 0.0f;
    for (int64_t j = 0; j < len; ++j) {
      const int64_t p = idx[j];
      if (p >= 0 && p < pool) acc += (w[j] * inv) * to_float(values[(p * nh + h) * ne + c]);
    }
    out[r * ne + c] = from_float<T>(acc);
  }
  if (probs)
    for (int64_t j = lane; j < list_len; j += 32) probs[r * list_len + j] = j < len ? w[j] * inv : 0.0f;
}

// The same attention for heads of kD elements (K = E = kD) in 16-byte packs,
// still a warp per (row, head): the scores by a lane per key (the whole
// query in registers, the key row read as packs, kPack running sums so the
// multiply-adds do not wait on each other), the output by kLanes lanes per
// key row, 32 / kLanes keys at once, their partial sums joined by a fixed
// shuffle tree. The warp-per-key dot products of the general kernel waited
// on a five-step shuffle tree each: 85 us a call in base's decoding, for a
// few megabytes read. Every sum in a fixed order, so a row's bits depend
// only on its own inputs.
template <typename T, int kD>
__global__ void attention_gather_packed_kernel(const T* q, const T* keys, const T* values,
                                               const int32_t* index, const int32_t* lengths,
                                               const int32_t* groups, int64_t rows, int64_t nh,
                                               int64_t /*nk = kD*/, int64_t /*ne = kD*/,
                                               int64_t list_len, int64_t pool, int64_t ngroups,
                                               float scale, T* out, float* probs) {
  constexpr int kPack = kPack16<T>;
  constexpr int kLanes = kD / kPack;  // lanes over one row of kD
  constexpr int kKeys = 32 / kLanes;  // keys weighed at once
  static_assert(kD % kPack == 0 && kLanes <= 32 && 32 % kLanes == 0);
  using P = Pack<T, kPack>;
  extern __shared__ float smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + warp;
  if (r >= rows * nh) return;  // a whole warp
  float* w = smem + int64_t(warp) * list_len;
  const int64_t h = r % nh;
  const GatherList list = gather_list(index, lengths, groups[r / nh], list_len, ngroups);
  const int64_t len = list.len;
  const int32_t* idx = list.idx;
  float qf[kD];
  const P* qp = reinterpret_cast<const P*>(q + r * kD);
#pragma unroll
  for (int i = 0; i < kD / kPack; ++i) {
    const P v = qp[i];
#pragma unroll
    for (int e = 0; e < kPack; ++e) qf[i * kPack + e] = to_float(v.v[e]);
  }
  float mx = -INFINITY;
  for (int64_t j = lane; j < len; j += 32) {
    const int64_t p = idx[j];
    float s = -INFINITY;
    if (p >= 0 && p < pool) {
      const P* kp = reinterpret_cast<const P*>(keys + (p * nh + h) * kD);
      float part[kPack] = {};
#pragma unroll
      for (int i = 0; i < kD / kPack; ++i) {
        const P v = kp[i];
#pragma unroll
        for (int e = 0; e < kPack; ++e) part[e] += qf[i * kPack + e] * to_float(v.v[e]);
      }
#pragma unroll
      for (int step = 1; step < kPack; step <<= 1)
#pragma unroll
        for (int e = 0; e < kPack; e += 2 * step) part[e] += part[e + step];
      s = scale * part[0];
    }
    w[j] = s;
    mx = fmaxf(mx, s);
  }
  mx = warp_max(mx);
  const float inv = exp_in_place(w, len, mx, lane);
  const int sub = lane / kLanes, part = lane % kLanes;
  float acc[kPack] = {};
#pragma unroll 4
  for (int64_t j = sub; j < len; j += kKeys) {
    const int64_t p = idx[j];
    if (p < 0 || p >= pool) continue;
    const P v = reinterpret_cast<const P*>(values + (p * nh + h) * kD)[part];
    const float pj = w[j] * inv;
#pragma unroll
    for (int e = 0; e < kPack; ++e) acc[e] += pj * to_float(v.v[e]);
  }
#pragma unroll
  for (int o = kLanes; o < 32; o <<= 1)
#pragma unroll
    for (int e = 0; e < kPack; ++e) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], o);
  if (sub == 0) {
    P o;
#pragma unroll
    for (int e = 0; e < kPack; ++e) o.v[e] = from_float<T>(acc[e]);
    reinterpret_cast<P*>(out + r * kD)[part] = o;
  }
  if (probs)
    for (int64_t j = lane; j < list_len; j += 32) probs[r * list_len + j] = j < len ? w[j] * inv : 0.0f;
}

// (value, id) ordered by value, then by the smaller id: the top-k order.
struct Candidate {
  float v;
  int32_t id;
};

__device__ __forceinline__ bool better(Candidate a, Candidate b) {
  return a.v > b.v || (a.v == b.v && a.id >= 0 && (b.id < 0 || a.id < b.id));
}

__device__ __forceinline__ Candidate warp_best(Candidate c) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const Candidate other{__shfl_xor_sync(0xffffffffu, c.v, o), __shfl_xor_sync(0xffffffffu, c.id, o)};
    if (better(other, c)) c = other;
  }
  return c;
}

// One block per row: max and sum of exponentials by block trees, then k
// rounds, each picking the best logit that comes after the previous pick in
// the top-k order. k passes over the vocabulary: for k above kListMax.
template <typename T>
__global__ void log_softmax_topk_rounds_kernel(const T* logits, int64_t vocab, int64_t k,
                                               float* values, int32_t* ids, float* lse) {
  __shared__ float scratch[32];
  __shared__ float best_v[32];
  __shared__ int32_t best_id[32];
  const int64_t row = blockIdx.x;
  const T* x = logits + row * vocab;
  float m = -INFINITY;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) m = fmaxf(m, to_float(x[v]));
  m = block_max(m, scratch);
  float sum = 0.0f;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) sum += expf(to_float(x[v]) - m);
  sum = block_sum(sum, scratch);
  const float row_lse = m + logf(sum);
  if (threadIdx.x == 0) lse[row] = row_lse;

  Candidate prev{INFINITY, -1};
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  for (int64_t i = 0; i < k; ++i) {
    Candidate c{-INFINITY, -1};
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
      const Candidate here{to_float(x[v]), static_cast<int32_t>(v)};
      if (better(prev, here) && better(here, c)) c = here;
    }
    c = warp_best(c);
    __syncthreads();
    if (lane == 0) {
      best_v[warp] = c.v;
      best_id[warp] = c.id;
    }
    __syncthreads();
    c = lane < (blockDim.x >> 5) ? Candidate{best_v[lane], best_id[lane]} : Candidate{-INFINITY, -1};
    c = warp_best(c);
    if (threadIdx.x == 0) {
      values[row * k + i] = c.v - row_lse;
      ids[row * k + i] = c.id;
    }
    prev = c;
  }
}

// The best of the block's candidates, in every thread.
__device__ __forceinline__ Candidate block_best(Candidate c, float* best_v, int32_t* best_id) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  c = warp_best(c);
  __syncthreads();  // the previous round's readers are done
  if (lane == 0) {
    best_v[warp] = c.v;
    best_id[warp] = c.id;
  }
  __syncthreads();
  c = lane < (blockDim.x >> 5) ? Candidate{best_v[lane], best_id[lane]} : Candidate{-INFINITY, -1};
  return warp_best(c);
}

// One block per row, one pass over the vocabulary: each thread keeps its
// kList best logits (sorted, in registers: every index is a constant once
// unrolled) and the running (max, sum of exponentials). Every element of the
// row's top k is among its own thread's kList best (k <= kList), so k rounds
// of a block-wide pick over the threads' list heads, the winner's thread
// shifting its list, give the top k in order; the vocabulary is read once
// instead of k + 2 times. The row is read in packs of kN (16 bytes where
// the row allows, else kN = 1), kLoads packs a thread at once before any is
// used: read an element at a time, each thread waited on memory for each of
// its ~150 logits in turn (115 us a call at 256 rows of 37,000). A pack
// moves the running maximum once, by its own maximum (raise_max), as the
// loss's kernel does. Which thread holds which logit changes neither the picks (`better`
// is a total order) nor, for a given V, the order of the row's sums.
template <typename T, int kList, int kN>
__global__ void log_softmax_topk_kernel(const T* logits, int64_t vocab, int64_t k, float* values,
                                        int32_t* ids, float* lse) {
  using P = Pack<T, kN>;
  constexpr int kLoads = kN == 1 ? 8 : 4;
  __shared__ float scratch_m[32], scratch_s[32];
  __shared__ float best_v[32];
  __shared__ int32_t best_id[32];
  const int64_t row = blockIdx.x, packs = vocab / kN;
  const P* x = reinterpret_cast<const P*>(logits + row * vocab);
  Candidate list[kList];
#pragma unroll
  for (int j = 0; j < kList; ++j) list[j] = {-INFINITY, -1};
  MaxSum acc;
  for (int64_t first = threadIdx.x; first < packs; first += int64_t(kLoads) * blockDim.x) {
    P xs[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u)
      if (const int64_t p = first + int64_t(u) * blockDim.x; p < packs) xs[u] = x[p];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int64_t p = first + int64_t(u) * blockDim.x;
      if (p >= packs) break;
      float top = -INFINITY;
#pragma unroll
      for (int j = 0; j < kN; ++j) top = fmaxf(top, to_float(xs[u].v[j]));
      acc = raise_max(acc, top);
      const bool adds = acc.m != -INFINITY;  // else every logit so far is -inf
#pragma unroll
      for (int j = 0; j < kN; ++j) {
        const Candidate here{to_float(xs[u].v[j]), static_cast<int32_t>(p * kN + j)};
        if (adds) acc.s += expf(here.v - acc.m);
        if (!better(here, list[kList - 1])) continue;  // a -inf logit still beats an empty entry
        list[kList - 1] = here;  // then bubbled up to its place
#pragma unroll
        for (int i = kList - 1; i > 0; --i)
          if (better(list[i], list[i - 1])) {
            const Candidate t = list[i];
            list[i] = list[i - 1];
            list[i - 1] = t;
          }
      }
    }
  }
  acc = block_max_sum(acc, scratch_m, scratch_s);
  const float row_lse = acc.m + logf(acc.s);
  if (threadIdx.x == 0) lse[row] = row_lse;
  for (int64_t i = 0; i < k; ++i) {
    const Candidate c = block_best(list[0], best_v, best_id);
    if (threadIdx.x == 0) {
      values[row * k + i] = c.v - row_lse;
      ids[row * k + i] = c.id;
    }
    if (list[0].id == c.id) {  // this thread's head won: the next one moves up
#pragma unroll
      for (int j = 0; j + 1 < kList; ++j) list[j] = list[j + 1];
      list[kList - 1] = {-INFINITY, -1};
    }
  }
}

// One thread per (row, list entry < T), each row's position p and pool row
// read from the upload: entries past p are left alone; a parent outside
// [0, R) copies no list (its entries become -1, which attention_gather reads
// as empty keys); a p outside [0, T) writes nothing.
__global__ void extend_history_kernel(const int32_t* prev, const int32_t* parents, const int32_t* positions,
                                      const int32_t* slots, int64_t n, int64_t rows, int64_t cols,
                                      int32_t* next, int32_t* lengths) {
  const int64_t total = n * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, j = i - r * cols, p = positions[r];
    if (p < 0 || p >= cols || j > p) continue;
    if (j == p) {
      next[r * cols + p] = slots[r];
      lengths[r] = static_cast<int32_t>(p + 1);
    } else {
      const int64_t parent = parents[r];
      next[r * cols + j] = parent >= 0 && parent < rows ? prev[parent * cols + j] : -1;
    }
  }
}

}  // namespace
}  // namespace tfm::ops::cuda

namespace tfm::ops::impl {
using namespace cuda;  // the helpers above

template <>
void extend_history<DeviceType::cuda>(const TensorView& prev, const TensorView& parents,
                                      const TensorView& positions, const TensorView& slots,
                                      const TensorView& next, const TensorView& lengths,
                                      const Stream& stream) {
  // A grid for the longest list: the positions are known only on the device.
  const int64_t n = parents.numel();
  extend_history_kernel<<<grid_for(n * prev.dim(1)), kThreads, 0, native(stream)>>>(
      prev.data_as<int32_t>(), parents.data_as<int32_t>(), positions.data_as<int32_t>(),
      slots.data_as<int32_t>(), n, prev.dim(0), prev.dim(1), next.data_as<int32_t>(),
      lengths.data_as<int32_t>());
  TFM_CHECK_LAUNCH();
}

template <>
void attention_gather<DeviceType::cuda>(const TensorView& q, const TensorView& keys,
                                        const TensorView& values, const TensorView& index,
                                        const TensorView& lengths, const TensorView& groups,
                                        float scale, const TensorView& out, const TensorView& probs,
                                        const Stream& stream) {
  const int64_t rows = q.dim(0), nh = q.dim(1), nk = q.dim(2), ne = values.dim(2),
                list_len = index.dim(1);
  const size_t shared = sizeof(float) * size_t(kWarpsPerBlock) * size_t(list_len > 0 ? list_len : 1);
  const unsigned blocks = static_cast<unsigned>((rows * nh + kWarpsPerBlock - 1) / kWarpsPerBlock);
  with_storage_type(q.dtype(), "attention_gather", [&](auto tag) {
    using T = decltype(tag);
    const T *pq = static_cast<const T*>(q.data()), *pk = static_cast<const T*>(keys.data()),
            *pv = static_cast<const T*>(values.data());
    T* po = static_cast<T*>(out.data());
    // Heads of 32, 64 or 128 whose rows lie on 16-byte boundaries take the
    // packed kernel. The choice depends on the shapes and the buffers'
    // alignment, never on the rows: the decoder's buffers keep both from
    // step to step, so a sentence gets the same bits in any batch.
    auto kernel = attention_gather_kernel<T>;
    const bool packed = nk == ne && packable<kPack16<T>>(nk, pq, pk, pv, po);
    if (packed && nk == 32) kernel = attention_gather_packed_kernel<T, 32>;
    if (packed && nk == 64) kernel = attention_gather_packed_kernel<T, 64>;
    if (packed && nk == 128) kernel = attention_gather_packed_kernel<T, 128>;
    if (shared > 48 * 1024)
      TFM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(shared)));
    kernel<<<blocks, 32 * kWarpsPerBlock, shared, native(stream)>>>(
        pq, pk, pv, index.data_as<int32_t>(), lengths.data_as<int32_t>(),
        groups.data_as<int32_t>(), rows, nh, nk, ne, list_len, keys.dim(0), index.dim(0), scale,
        po, probs.empty() ? nullptr : probs.data_as<float>());
    TFM_CHECK_LAUNCH();
  });
}

template <>
void log_softmax_topk<DeviceType::cuda>(const TensorView& logits, const TensorView& values,
                                        const TensorView& ids, const TensorView& lse,
                                        const Stream& stream) {
  const int64_t rows = logits.dim(0), vocab = logits.dim(1), k = values.dim(1);
  with_storage_type(logits.dtype(), "log_softmax_topk", [&](auto tag) {
    using T = decltype(tag);
    // Beam search asks for 2W: 8 at the paper's beam of 4.
    constexpr int kN = kPack16<T>;
    const bool packed = packable<kN>(vocab, static_cast<const T*>(logits.data()));
    auto kernel = k <= 8    ? (packed ? log_softmax_topk_kernel<T, 8, kN> : log_softmax_topk_kernel<T, 8, 1>)
                  : k <= 16 ? (packed ? log_softmax_topk_kernel<T, 16, kN> : log_softmax_topk_kernel<T, 16, 1>)
                            : log_softmax_topk_rounds_kernel<T>;
    kernel<<<static_cast<unsigned>(rows), kThreads, 0, native(stream)>>>(
        static_cast<const T*>(logits.data()), vocab, k, values.data_as<float>(),
        ids.data_as<int32_t>(), lse.data_as<float>());
    TFM_CHECK_LAUNCH();
  });
}

}  // namespace tfm::ops::impl
