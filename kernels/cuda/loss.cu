// CUDA output-layer ops (loss.h): log_softmax and the label-smoothed
// cross-entropy, forward and backward at once. One block per row of V
// logits. The row's maximum and sum of exponentials come from one online
// pass (MaxSum, common.cuh), combined over the block by a fixed tree; all
// statistics are f32. Storage f32, bf16 or f16.
#include "kernels/cuda/common.cuh"
#include "kernels/loss.h"

namespace tfm::ops::cuda {
namespace {

// log(sum_v exp(x_v)) of row x[0 .. V), stable.
template <typename T>
__device__ __forceinline__ float row_logsumexp(const T* x, int64_t vocab, float* scratch_m,
                                               float* scratch_s) {
  MaxSum acc;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) acc = push(acc, to_float(x[v]));
  acc = block_max_sum(acc, scratch_m, scratch_s);
  return acc.m + logf(acc.s);
}

// y = x - logsumexp(x) per row; y may be x (each thread reads its elements
// before it writes them, after the row's reductions).
template <typename T>
__global__ void log_softmax_kernel(const T* x, T* y, int64_t vocab) {
  __shared__ float scratch_m[32], scratch_s[32];
  const int64_t base = int64_t(blockIdx.x) * vocab;
  const float lse = row_logsumexp(x + base, vocab, scratch_m, scratch_s);
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
    y[base + v] = from_float<T>(to_float(x[base + v]) - lse);
}

// Row n with target t in [0, V):
//   lse = logsumexp(x);  nll = lse - x[t];  mean_v(-logp[v]) = lse - mean_v(x)
//   loss = (1 - eps) nll + eps (lse - mean_v(x))
//   g[v] := grad_scale (exp(x[v] - lse) - (1 - eps) [v = t] - eps / V)
// Two passes over the row: one reads it for the running (max, sum of
// exponentials) and the sum of x together, the other reads it again and
// writes g, in G (g may be x itself, then of one type: each thread reads a
// pack before it writes it, and the reductions end before the second
// pass). The output layer's backward GEMMs read g in the compute dtype, so
// a 16-bit g saves the f32 gradient's write and the cast's read and write.
// Packs of kN elements (16-byte loads of x where V and the rows allow, else
// kN = 1): the running maximum moves once a pack, by the pack's maximum;
// element-wise loads of a 37,000-logit row ran at half of HBM bandwidth.
// sums += {loss, nll} by atomicAdd: rows add in any order, so the last bits
// of the sums can differ from run to run. A row with t < 0 (padding), or an
// invalid t >= V, adds nothing and gets zeros (targets are validated on the
// host before they reach the GPU).
template <typename T, typename G, int kN>
__global__ void smoothed_cross_entropy_kernel(const T* logits, G* grads, const int32_t* targets,
                                              int64_t vocab, float eps, float grad_scale,
                                              float* sums) {
  using P = Pack<T, kN>;
  using Q = Pack<G, kN>;
  __shared__ float scratch_m[32], scratch_s[32];
  const int64_t base = int64_t(blockIdx.x) * vocab, packs = vocab / kN;
  const P* x = reinterpret_cast<const P*>(logits + base);
  Q* g = reinterpret_cast<Q*>(grads + base);
  const int64_t t = targets[blockIdx.x];
  if (t < 0 || t >= vocab) {  // the whole block takes this branch
    Q zero;
#pragma unroll
    for (int j = 0; j < kN; ++j) zero.v[j] = from_float<G>(0.0f);
    for (int64_t v = threadIdx.x; v < packs; v += blockDim.x) g[v] = zero;
    return;
  }
  // Read before any thread of the block can overwrite the row (the
  // reductions below hold barriers).
  const float x_t = to_float(logits[base + t]);
  MaxSum acc;
  float sum_x = 0.0f;
  for (int64_t v = threadIdx.x; v < packs; v += blockDim.x) {
    const P xs = x[v];
    float top = -INFINITY;
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      const float xv = to_float(xs.v[j]);
      top = fmaxf(top, xv);
      sum_x += xv;
    }
    acc = raise_max(acc, top);
    if (acc.m != -INFINITY) {  // else every element so far is -inf
#pragma unroll
      for (int j = 0; j < kN; ++j) acc.s += expf(to_float(xs.v[j]) - acc.m);
    }
  }
  acc = block_max_sum(acc, scratch_m, scratch_s);
  sum_x = block_sum(sum_x, scratch_m);  // its leading barrier protects scratch_m
  const float lse = acc.m + logf(acc.s);
  const float nll = lse - x_t;
  const float uniform = eps / static_cast<float>(vocab);
  for (int64_t v = threadIdx.x; v < packs; v += blockDim.x) {
    const P xs = x[v];
    Q out;
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      const float p = expf(to_float(xs.v[j]) - lse);
      out.v[j] = from_float<G>(grad_scale * (p - (v * kN + j == t ? 1.0f - eps : 0.0f) - uniform));
    }
    g[v] = out;
  }
  if (threadIdx.x == 0) {
    const float loss = (1.0f - eps) * nll + eps * (lse - sum_x / static_cast<float>(vocab));
    atomicAdd(sums, loss);
    atomicAdd(sums + 1, nll);
  }
}

}  // namespace
}  // namespace tfm::ops::cuda

namespace tfm::ops::impl {
using namespace cuda;  // the helpers above

template <>
void log_softmax<DeviceType::cuda>(const TensorView& x, const TensorView& y, const Stream& stream) {
  const int64_t vocab = x.dim(-1), rows = vocab == 0 ? 0 : x.numel() / vocab;
  if (rows == 0) return;
  with_storage_type(x.dtype(), "log_softmax", [&](auto t) {
    using T = decltype(t);
    log_softmax_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, native(stream)>>>(
        static_cast<const T*>(x.data()), static_cast<T*>(y.data()), vocab);
    TFM_CHECK_LAUNCH();
  });
}

template <>
void smoothed_cross_entropy<DeviceType::cuda>(const TensorView& logits, const TensorView& targets,
                                              float eps, float grad_scale, const TensorView& sums,
                                              const TensorView& dlogits, const Stream& stream) {
  const int64_t vocab = logits.dim(-1), rows = vocab == 0 ? 0 : logits.numel() / vocab;
  if (rows == 0) return;
  with_storage_type(logits.dtype(), "smoothed_cross_entropy", [&](auto t) {
    using T = decltype(t);
    with_storage_type(dlogits.dtype(), "smoothed_cross_entropy", [&](auto gt) {
      using G = decltype(gt);
      constexpr int kN = kPack16<T>;
      const T* x = static_cast<const T*>(logits.data());
      G* g = static_cast<G*>(dlogits.data());
      auto kernel = packable<kN>(vocab, x, static_cast<const G*>(g)) ? smoothed_cross_entropy_kernel<T, G, kN>
                                                                     : smoothed_cross_entropy_kernel<T, G, 1>;
      kernel<<<static_cast<unsigned>(rows), kThreads, 0, native(stream)>>>(
          x, g, static_cast<const int32_t*>(targets.data()), vocab, eps, grad_scale,
          static_cast<float*>(sums.data()));
      TFM_CHECK_LAUNCH();
    });
  });
}

}  // namespace tfm::ops::impl

// Storage types instantiated above, closed list: float, __nv_bfloat16, __half
// (through with_storage_type; the loss's logits and gradient in every pair
// of them); targets int32; statistics and sums float.
