// CUDA layer norm (layernorm.h): plain, and fused with the post-norm residual and
// dropout, forward and backward. Rows of D elements belong to one warp (D <=
// kWarpRowMax) or one block (larger D), read in 16-byte packs when D and the
// tensors allow; statistics are two-pass in f32 (mean, then the centred sum
// of squares, which does not cancel) and saved as f32.
// gamma, beta and their gradients are f32, bf16 or f16 (FloatRef), so 16-bit
// activations can use f32 master parameters. dgamma and dbeta are column sums
// over rows, done deterministically by column_sums (common.cuh) before the
// row pass, because dx may overwrite dy.
#include "kernels/cuda/common.cuh"
#include "kernels/layernorm.h"
#include "libcore/base/rng.h"

namespace tfm::ops::cuda {
namespace {

// The residual branch of the fused forward: h = residual + s * keep * scale,
// with the keep rule and rounding of dropout.cu.
struct AddDropout {
  RngKey key;
  float p = 0, scale = 1;
};

// Dropout's keep flags of the kN elements from flat index i: one Philox
// block serves four consecutive elements, so a pack draws kN / 4 blocks
// where element-wise calls would draw kN (Philox, not memory, was most of
// the fused kernels' time). i is a multiple of kN (the packed launch), and
// so of 4 when kN is; kN = 1 or 2 draw per element. The same bits as
// philox_bits(key, i + j), which dropout.cu and the CPU use.
template <int kN>
__device__ __forceinline__ void keep_flags(const AddDropout& drop, int64_t i, bool (&keep)[kN]) {
  if constexpr (kN % 4 == 0) {
#pragma unroll
    for (int q = 0; q < kN / 4; ++q) {
      const Philox4 r = philox_block(drop.key, static_cast<uint64_t>(i / 4 + q));
#pragma unroll
      for (int l = 0; l < 4; ++l) keep[4 * q + l] = uniform01(r.v[l]) >= drop.p;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kN; ++j)
      keep[j] = uniform01(philox_bits(drop.key, static_cast<uint64_t>(i + j))) >= drop.p;
  }
}

// kN consecutive elements of a row at c (c a multiple of kN): one packed
// load or store when kN > 1 (the launch checks packable, common.cuh).
template <typename T, int kN>
__device__ __forceinline__ Pack<T, kN> load_pack(const T* p, int64_t i) {
  return *reinterpret_cast<const Pack<T, kN>*>(p + i);
}
template <typename T, int kN>
__device__ __forceinline__ void store_pack(T* p, int64_t i, const Pack<T, kN>& v) {
  *reinterpret_cast<Pack<T, kN>*>(p + i) = v;
}

// y = gamma * (x - mean) * rstd + beta per row; mean, rstd (R) f32.
// kFused: x is first computed as h = residual + dropout(s) and stored; the
// statistics are then those of the stored (rounded) h, which backward reads.
// A lane (or thread) takes packs of kN elements at lane * kN, stepping by
// its group's width times kN; kN = 1 is element by element.
template <typename T, bool kBlockPerRow, bool kFused, int kN>
__global__ void layernorm_forward_kernel(const T* x, const T* s, T* h, AddDropout drop,
                                         FloatRef gamma, FloatRef beta, float eps, T* y,
                                         float* mean, float* rstd, int64_t rows, int64_t d) {
  __shared__ float scratch[32];
  const int64_t row = row_of_thread<kBlockPerRow>();
  if (row >= rows) return;  // a whole warp; never in block mode
  const int64_t base = row * d;
  const int64_t first = int64_t(threadIdx.x) * kN, step = int64_t(blockDim.x) * kN;

  if constexpr (kFused) {
    for (int64_t c = first; c < d; c += step) {
      const Pack<T, kN> xs = load_pack<T, kN>(x, base + c), ss = load_pack<T, kN>(s, base + c);
      Pack<T, kN> hs;
      bool keep[kN];
      keep_flags<kN>(drop, base + c, keep);
#pragma unroll
      for (int j = 0; j < kN; ++j) {
        const float kept = keep[j] ? __fmul_rn(to_float(ss.v[j]), drop.scale) : 0.0f;
        hs.v[j] = from_float<T>(__fadd_rn(to_float(xs.v[j]), kept));
      }
      store_pack<T, kN>(h, base + c, hs);
    }
    x = h;  // each thread reads back only the elements it wrote
  }

  float sum = 0.0f;
  for (int64_t c = first; c < d; c += step) {
    const Pack<T, kN> xs = load_pack<T, kN>(x, base + c);
#pragma unroll
    for (int j = 0; j < kN; ++j) sum += to_float(xs.v[j]);
  }
  const float mu = row_sum<kBlockPerRow>(sum, scratch) / static_cast<float>(d);
  float sq = 0.0f;
  for (int64_t c = first; c < d; c += step) {
    const Pack<T, kN> xs = load_pack<T, kN>(x, base + c);
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      const float dev = to_float(xs.v[j]) - mu;
      sq += dev * dev;
    }
  }
  const float var = row_sum<kBlockPerRow>(sq, scratch) / static_cast<float>(d);
  const float rs = 1.0f / sqrtf(var + eps);
  for (int64_t c = first; c < d; c += step) {
    const Pack<T, kN> xs = load_pack<T, kN>(x, base + c);
    Pack<T, kN> ys;
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      const float xhat = (to_float(xs.v[j]) - mu) * rs;
      ys.v[j] = from_float<T>(gamma.load(c + j) * xhat + beta.load(c + j));
    }
    store_pack<T, kN>(y, base + c, ys);
  }
  if (threadIdx.x == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
}

// dx = rstd * (g - mean_D(g) - xhat * mean_D(g * xhat)), g = gamma * dy.
// dx may be dy: each thread reads dy[i] before it writes dx[i], and only
// after both row sums are complete. kFused also writes ds = dropout(dx as
// stored), what dropout_backward would make of the stored dh. Packs of kN
// as in the forward.
template <typename T, bool kBlockPerRow, bool kFused, int kN>
__global__ void layernorm_backward_kernel(const T* x, FloatRef gamma, const float* mean,
                                          const float* rstd, const T* dy, T* dx, T* ds,
                                          AddDropout drop, int64_t rows, int64_t d) {
  __shared__ float scratch[32];
  const int64_t row = row_of_thread<kBlockPerRow>();
  if (row >= rows) return;
  const int64_t base = row * d;
  const int64_t first = int64_t(threadIdx.x) * kN, step = int64_t(blockDim.x) * kN;
  const float mu = mean[row], rs = rstd[row];

  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int64_t c = first; c < d; c += step) {
    const Pack<T, kN> xs = load_pack<T, kN>(x, base + c), dys = load_pack<T, kN>(dy, base + c);
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      const float g = gamma.load(c + j) * to_float(dys.v[j]);
      sum_g += g;
      sum_gx += g * ((to_float(xs.v[j]) - mu) * rs);
    }
  }
  const float mean_g = row_sum<kBlockPerRow>(sum_g, scratch) / static_cast<float>(d);
  const float mean_gx = row_sum<kBlockPerRow>(sum_gx, scratch) / static_cast<float>(d);
  for (int64_t c = first; c < d; c += step) {
    const Pack<T, kN> xs = load_pack<T, kN>(x, base + c), dys = load_pack<T, kN>(dy, base + c);
    Pack<T, kN> out, dss;
    bool keep[kN];
    if constexpr (kFused) keep_flags<kN>(drop, base + c, keep);
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      const float g = gamma.load(c + j) * to_float(dys.v[j]);
      const float xhat = (to_float(xs.v[j]) - mu) * rs;
      out.v[j] = from_float<T>(rs * (g - mean_g - xhat * mean_gx));
      if constexpr (kFused)
        dss.v[j] = from_float<T>(keep[j] ? __fmul_rn(to_float(out.v[j]), drop.scale) : 0.0f);
    }
    store_pack<T, kN>(dx, base + c, out);
    if constexpr (kFused) store_pack<T, kN>(ds, base + c, dss);
  }
}

// dgamma[c] += sum_r dy[r, c] * xhat[r, c];  dbeta[c] += sum_r dy[r, c]
template <typename T>
struct ParamGradTerms {
  const T* x;
  const T* dy;
  const float* mean;
  const float* rstd;
  int64_t d;
  __device__ void operator()(int64_t r, int64_t c, float (&acc)[2]) const {
    const float g = to_float(dy[r * d + c]);
    acc[0] += g * ((to_float(x[r * d + c]) - mean[r]) * rstd[r]);
    acc[1] += g;
  }
};

template <bool kFused>
void forward(const TensorView& x, const TensorView& s, const TensorView& h, AddDropout drop,
             const TensorView& gamma, const TensorView& beta, float eps, const TensorView& y,
             const TensorView& mean, const TensorView& rstd, const Stream& stream,
             const char* op) {
  const int64_t d = y.dim(-1), rows = d == 0 ? 0 : y.numel() / d;
  if (rows == 0 || d == 0) return;
  const FloatRef g = float_ref(gamma, op), b = float_ref(beta, op);
  with_storage_type(y.dtype(), op, [&](auto t) {
    using T = decltype(t);
    const T* xp = static_cast<const T*>(x.data());
    const T* sp = static_cast<const T*>(s.data());
    T* hp = static_cast<T*>(h.data());
    T* yp = static_cast<T*>(y.data());
    constexpr int kN = kPack16<T>;
    const bool packed = packable<kN>(d, xp, sp, static_cast<const T*>(hp), static_cast<const T*>(yp));
    with_row_shape(rows, d, [&](auto block_per_row, dim3 grid, dim3 block) {
      constexpr bool kBlock = decltype(block_per_row)::value;
      auto kernel = packed ? layernorm_forward_kernel<T, kBlock, kFused, kN>
                           : layernorm_forward_kernel<T, kBlock, kFused, 1>;
      kernel<<<grid, block, 0, native(stream)>>>(xp, sp, hp, drop, g, b, eps, yp,
                                                 static_cast<float*>(mean.data()),
                                                 static_cast<float*>(rstd.data()), rows, d);
      TFM_CHECK_LAUNCH();
    });
  });
}

template <bool kFused>
void backward(const TensorView& x, const TensorView& gamma, const TensorView& mean,
              const TensorView& rstd, const TensorView& dy, const TensorView& dx,
              const TensorView& ds, AddDropout drop, const TensorView& dgamma,
              const TensorView& dbeta, const Stream& stream, const char* op) {
  const int64_t d = dy.dim(-1), rows = d == 0 ? 0 : dy.numel() / d;
  if (rows == 0 || d == 0) return;
  const FloatRef g = float_ref(gamma, op);
  const FloatRef dg = float_ref(dgamma, op), db = float_ref(dbeta, op);
  with_storage_type(dy.dtype(), op, [&](auto t) {
    using T = decltype(t);
    const T* xp = static_cast<const T*>(x.data());
    const T* dyp = static_cast<const T*>(dy.data());
    const float* mp = static_cast<const float*>(mean.data());
    const float* rp = static_cast<const float*>(rstd.data());
    // Parameter gradients first: the row pass may overwrite dy.
    column_sums<2>(ParamGradTerms<T>{xp, dyp, mp, rp, d}, rows, d, dg, db, native(stream));
    T* dxp = static_cast<T*>(dx.data());
    T* dsp = static_cast<T*>(ds.data());
    constexpr int kN = kPack16<T>;
    const bool packed =
        packable<kN>(d, xp, dyp, static_cast<const T*>(dxp), static_cast<const T*>(dsp));
    with_row_shape(rows, d, [&](auto block_per_row, dim3 grid, dim3 block) {
      constexpr bool kBlock = decltype(block_per_row)::value;
      auto kernel = packed ? layernorm_backward_kernel<T, kBlock, kFused, kN>
                           : layernorm_backward_kernel<T, kBlock, kFused, 1>;
      kernel<<<grid, block, 0, native(stream)>>>(xp, g, mp, rp, dyp, dxp, dsp, drop, rows, d);
      TFM_CHECK_LAUNCH();
    });
  });
}

}  // namespace
}  // namespace tfm::ops::cuda

namespace tfm::ops::impl {
using namespace cuda;  // the helpers above

template <>
void layernorm_forward<DeviceType::cuda>(const TensorView& x, const TensorView& gamma,
                                         const TensorView& beta, float eps, const TensorView& y,
                                         const TensorView& mean, const TensorView& rstd,
                                         const Stream& stream) {
  forward<false>(x, {}, {}, {}, gamma, beta, eps, y, mean, rstd, stream, "layernorm_forward");
}

template <>
void layernorm_backward<DeviceType::cuda>(const TensorView& x, const TensorView& gamma,
                                          const TensorView& mean, const TensorView& rstd,
                                          const TensorView& dy, const TensorView& dx,
                                          const TensorView& dgamma, const TensorView& dbeta,
                                          const Stream& stream) {
  backward<false>(x, gamma, mean, rstd, dy, dx, {}, {}, dgamma, dbeta, stream,
                  "layernorm_backward");
}

template <>
void add_dropout_layernorm_forward<DeviceType::cuda>(const TensorView& residual,
                                                     const TensorView& s, float p,
                                                     const RngKey& key, const TensorView& gamma,
                                                     const TensorView& beta, float eps,
                                                     const TensorView& h, const TensorView& y,
                                                     const TensorView& mean, const TensorView& rstd,
                                                     const Stream& stream) {
  forward<true>(residual, s, h, AddDropout{key, p, 1.0f / (1.0f - p)}, gamma, beta, eps, y, mean,
                rstd, stream, "add_dropout_layernorm_forward");
}

template <>
void add_dropout_layernorm_backward<DeviceType::cuda>(const TensorView& h, const TensorView& gamma,
                                                      const TensorView& mean,
                                                      const TensorView& rstd, const TensorView& dy,
                                                      float p, const RngKey& key,
                                                      const TensorView& dh, const TensorView& ds,
                                                      const TensorView& dgamma,
                                                      const TensorView& dbeta,
                                                      const Stream& stream) {
  backward<true>(h, gamma, mean, rstd, dy, dh, ds, AddDropout{key, p, 1.0f / (1.0f - p)}, dgamma,
                 dbeta, stream, "add_dropout_layernorm_backward");
}

}  // namespace tfm::ops::impl

// Storage types instantiated above, closed list: activations float,
// __nv_bfloat16, __half (through with_storage_type), each with a warp and a
// block per row, plain and fused, packed and element by element; gamma, beta, dgamma, dbeta f32, bf16 or
// f16 through FloatRef, chosen at run time; statistics float.
