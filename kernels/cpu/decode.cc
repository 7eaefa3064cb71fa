// CPU decoding ops (decode.h): attention over gathered keys and the
// top-k log-softmax. Every row is computed by one thread in a fixed order:
// dot products and sums of exponentials in lanes added by a fixed tree
// (vectorizable without reassociating any one sum), the weighted sum of
// values in key order; f32 exponentials from a vectorizable expf. f64 (for
// tests) takes the plain scalar path. So a row's bits depend on nothing but
// its own inputs: not on the other rows, their number or the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/gemm_rows.h"
#include "kernels/decode.h"

namespace tfm::ops::cpu {
namespace {

constexpr int kLanes = 8;

// sum_i a[i] * b[i]: lane l sums the terms i = l (mod kLanes) in order, the
// lanes are added by a fixed tree.
template <typename T>
T dot(const T* a, const T* b, int64_t k) {
  T acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < k; ++i, ++l) acc[l] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// Sixteen floats as one value (GCC vector extensions): one AVX-512
// register, two AVX2 or four SSE2 ones, depending on the clone that runs.
// Every lane does the same arithmetic in every clone, so all give the same
// bits; target_clones picks the widest the CPU has at load time.
typedef float F16 __attribute__((vector_size(64)));
typedef int32_t I16 __attribute__((vector_size(64)));
typedef double D8 __attribute__((vector_size(64)));
// Eight floats: one AVX2 register. GCC lowers a comparison or a select
// (?:) of sixteen-float vectors, and a conversion to int, lane by lane
// (vucomiss, cmov) wherever the CPU has no 64-byte registers: in the AVX2
// clone; and a comparison's mask reduced to one bool (any16) even in the
// AVX-512 one. Those run on eight-float halves instead.
typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));
typedef double D4 __attribute__((vector_size(32)));
#define TFM_WIDE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

[[gnu::always_inline]] inline F16 load16(const float* p) {
  F16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

[[gnu::always_inline]] inline F8 load8(const float* p) {
  F8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Whether the AVX-512 clone runs (the CPU has AVX-512F) and TFM_ROW_GEMM
// does not cap the decoder's CPU kernels at AVX2 (an A/B switch, also what
// lets a test compare the two widths' bits on one machine): the clones'
// bodies pick their vector width by it, once a call.
inline bool wide512() {
  static const bool yes = __builtin_cpu_supports("avx512f") && gemm_row_invariant_path() == RowGemmPath::avx512;
  return yes;
}

// exp(x) for x <= 0, lane by lane (Cephes' expf: x = n ln 2 + r, a degree-7
// polynomial for e^r, 2^n from the exponent bits): within 2 ulp. Below -87
// it gives exp(-87), nothing next to the row's largest term, 1. V is F16
// (AVX-512) or F8 (AVX2: F16's clamp and conversion would go lane by lane);
// every lane computes the same in both, so they give the same bits.
template <typename V>
[[gnu::always_inline]] inline V exp_lanes(V x) {
  using I = std::conditional_t<sizeof(V) == 64, I16, I8>;
  const V lo = x * 0.0f - 87.0f;
  x = x > lo ? x : lo;
  const V n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x / ln 2)
  V r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const V z = r * r;
  V p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * z + r + 1.0f;
  const I bits = (__builtin_convertvector(n, I) + 127) << 23;
  return p * reinterpret_cast<V>(bits);
}

// exp_lanes of sixteen floats, whole (kZmm) or by halves.
template <bool kZmm>
[[gnu::always_inline]] inline F16 exp_nonpositive(F16 x) {
  if constexpr (kZmm) {
    return exp_lanes(x);
  } else {
    const F8 a = exp_lanes(F8(__builtin_shufflevector(x, x, 0, 1, 2, 3, 4, 5, 6, 7)));
    const F8 b = exp_lanes(F8(__builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15)));
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  }
}

// a[0] + ... + a[15] by a fixed tree: halves folded onto each other.
[[gnu::always_inline]] inline float fold16(F16 a) {
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) a[l] += a[l + w];
  return a[0];
}

// The sums of sixteen vectors' lanes at once: lane j of the result is
// a[j][0] + ... + a[j][15], by a fixed tree (each vector's halves, then
// quarters, eighths and pairs folded: four rounds for all sixteen).
[[gnu::always_inline]] inline F16 sum16x16(const F16* a) {
  F16 b[8], c[4], d[2];
  for (int i = 0; i < 8; ++i)  // lanes 0-7: vector 2i's halves added, 8-15: 2i + 1's
    b[i] = __builtin_shufflevector(a[2 * i], a[2 * i + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
           __builtin_shufflevector(a[2 * i], a[2 * i + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  for (int i = 0; i < 4; ++i)  // four lanes each for vectors 4i .. 4i + 3
    c[i] = __builtin_shufflevector(b[2 * i], b[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
           __builtin_shufflevector(b[2 * i], b[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  for (int i = 0; i < 2; ++i)  // two lanes each for vectors 8i .. 8i + 7
    d[i] = __builtin_shufflevector(c[2 * i], c[2 * i + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29) +
           __builtin_shufflevector(c[2 * i], c[2 * i + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
  return __builtin_shufflevector(d[0], d[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +
         __builtin_shufflevector(d[0], d[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

// The softmax of one (row, head)'s scores w[0, len) in place, in whole
// blocks of sixteen (w holds them: its lanes past len are read, masked off
// and left 0): the largest score, e^(w - max) by exp_lanes, their sum in
// double over sixteen float lanes (lane l sums the scores j = l mod 16 in
// order, the lanes added in order), each weight times 1 / sum. V is F16
// (AVX-512) or F8 (AVX2, each block by halves); a lane's arithmetic is the
// same in both, so the same bits. No scalar pass: a chain of maxima a
// score, and the block copies a masked tail took, cost a quarter of the
// demo model's attention.
template <typename V>
[[gnu::always_inline]] inline void softmax_blocks(float* w, int64_t len) {
  using I = std::conditional_t<sizeof(V) == 64, I16, I8>;
  constexpr int kL = sizeof(V) / sizeof(float), kHalves = 16 / kL;
  I lane;
  for (int l = 0; l < kL; ++l) lane[l] = l;
  const auto load = [](const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  V m = V{} - INFINITY;
  for (int64_t j0 = 0; j0 < len; j0 += kL) {
    const V x = load(w + j0);
    m = ((lane < static_cast<int32_t>(len - j0)) & (m < x)) ? x : m;
  }
  float mx = m[0];
  for (int l = 1; l < kL; ++l) mx = std::max(mx, m[l]);
  V part[kHalves] = {};
  for (int64_t j0 = 0; j0 < len; j0 += 16)
    for (int i = 0; i < kHalves; ++i) {
      const I valid = lane < static_cast<int32_t>(len - j0 - i * kL);
      V x = exp_lanes(valid ? load(w + j0 + i * kL) - mx : V{});
      x = valid ? x : V{};
      std::memcpy(w + j0 + i * kL, &x, sizeof x);
      part[i] += x;
    }
  double sum = 0;
  for (int i = 0; i < kHalves; ++i)
    for (int l = 0; l < kL; ++l) sum += part[i][l];
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j0 = 0; j0 < len; j0 += kL) {
    const V x = load(w + j0) * inv;
    std::memcpy(w + j0, &x, sizeof x);
  }
}

// Head sizes of whole vectors up to kWide of them take attend_f32's
// register path (d_k = d_v = 64 in base and big); others the general one.
constexpr int64_t kWide = 8;

// One (row, head) of attention_gather in f32 is weigh_lanes (scores into
// w (len, rounded up to 16), their softmax) and then attend_lanes' values
// (the weighted values into o (e, zeroed)). Exponentials as the top-k's, the softmax's sum in double over sixteen
// float lanes, the values added in key order. When K and E are whole
// vectors, at most kWide, sixteen keys' dot products are reduced together
// (sum16x16) and the output stays in registers; else each dot product is
// folded alone and the output is added to in memory. kChunks > 0: K = E =
// 16 kChunks, known to the compiler, which then keeps q and the output in
// registers (with the count at run time it kept them on the stack, each
// multiply-add a store and a load: half the demo model's decoding time);
// the same operations in the same order, so the same bits.
template <bool kZmm, int kChunks>
[[gnu::always_inline]] inline void weigh_lanes(const float* qr, const float* keys, const float* values,
                                               const int32_t* idx, int64_t len, int64_t nh, int64_t h, int64_t k,
                                               int64_t e, bool wide, float scale, float* w) {
  const int64_t ck = kChunks > 0 ? kChunks : k / 16;
  constexpr int kHeld = kChunks > 0 ? kChunks : kWide;
  if (wide) {
    F16 q[kHeld] = {};
#pragma GCC unroll 8
    for (int64_t c = 0; c < ck; ++c) q[c] = load16(qr + 16 * c);
    for (int64_t j0 = 0; j0 < len; j0 += 16) {
      F16 acc[16];
      const int64_t n = std::min<int64_t>(16, len - j0);
      for (int64_t j = 0; j < 16; ++j) {
        // Each sum written once (zeroing the array first cost a `rep stos`
        // of 1 KB a block, a visible share of the attention).
        F16 a = {};
        if (j < n) {
          const float* kr = keys + (idx[j0 + j] * nh + h) * k;
          // The value this key weighs, for the loop after the softmax,
          // and the key a block further on: gathered rows are misses the
          // loads would wait for.
          const float* vr = values + (idx[j0 + j] * nh + h) * e;
          for (int64_t c = 0; c < e; c += 16) __builtin_prefetch(vr + c);
          if (h + 1 < nh) {  // the next head's part of this key row
            for (int64_t c = 0; c < ck; ++c) __builtin_prefetch(kr + k + 16 * c);
          }
          if (j0 + j + 16 < len) {
            const float* ahead = keys + (idx[j0 + j + 16] * nh + h) * k;
            for (int64_t c = 0; c < ck; ++c) __builtin_prefetch(ahead + 16 * c);
          }
#pragma GCC unroll 8
          for (int64_t c = 0; c < ck; ++c) a += q[c] * load16(kr + 16 * c);
        }
        acc[j] = a;
      }
      const F16 d = scale * sum16x16(acc);
      std::memcpy(w + j0, &d, sizeof d);
    }
  } else {
    for (int64_t j = 0; j < len; ++j) {
      const float* kr = keys + (idx[j] * nh + h) * k;
      if (k % 16 == 0) {
        F16 acc = {};
        for (int64_t c = 0; c < k; c += 16) acc += load16(qr + c) * load16(kr + c);
        w[j] = scale * fold16(acc);
      } else {
        w[j] = scale * dot(qr, kr, k);
      }
    }
  }
  softmax_blocks<std::conditional_t<kZmm, F16, F8>>(w, len);
}

// One (row, head): its weights (weigh_lanes), then the weighted values
// into o.
template <bool kZmm, int kChunks>
[[gnu::always_inline]] inline void attend_lanes(const float* qr, const float* keys, const float* values,
                                                const int32_t* idx, int64_t len, int64_t nh, int64_t h,
                                                int64_t k, int64_t e, float scale, float* w, float* o) {
  const bool wide = kChunks > 0 || (k % 16 == 0 && e % 16 == 0 && k <= 16 * kWide && e <= 16 * kWide);
  const int64_t ce = kChunks > 0 ? kChunks : e / 16;
  constexpr int kHeld = kChunks > 0 ? kChunks : kWide;
  weigh_lanes<kZmm, kChunks>(qr, keys, values, idx, len, nh, h, k, e, wide, scale, w);
  if (wide) {
    F16 acc[kHeld] = {};
    for (int64_t j = 0; j < len; ++j) {
      const float* vr = values + (idx[j] * nh + h) * e;
#pragma GCC unroll 8
      for (int64_t c = 0; c < ce; ++c) acc[c] += w[j] * load16(vr + 16 * c);
    }
    std::memcpy(o, acc, static_cast<size_t>(e) * sizeof(float));
    return;
  }
  for (int64_t j = 0; j < len; ++j) {
    const float* vr = values + (idx[j] * nh + h) * e;
    for (int64_t c = 0; c < e; ++c) o[c] += w[j] * vr[c];
  }
}

// The weighted values of kHeads heads h0.. of one row at once, each head's
// weights in w + h * w_stride (weigh_lanes'): per key, the heads' values
// are one contiguous row of the pool, and each head's sums (a chain of
// dependent adds in key order, as attend_lanes') run beside the other
// heads' instead of after them: the same operations in the same order for
// each head, so the same bits.
template <int kChunks, int kHeads>
[[gnu::always_inline]] inline void weigh_values_zmm(const float* values, const int32_t* idx, int64_t len,
                                                    int64_t nh, int64_t h0, const float* w, int64_t w_stride,
                                                    float* o) {
  constexpr int64_t e = 16 * kChunks;
  F16 acc[kHeads][kChunks] = {};
  for (int64_t j = 0; j < len; ++j) {
    const float* vr = values + (idx[j] * nh + h0) * e;
#pragma GCC unroll 8
    for (int hh = 0; hh < kHeads; ++hh) {
      const float wj = w[(h0 + hh) * w_stride + j];
#pragma GCC unroll 8
      for (int c = 0; c < kChunks; ++c) acc[hh][c] += wj * load16(vr + hh * e + 16 * c);
    }
  }
  std::memcpy(o + h0 * e, acc, sizeof acc);
}

// attend_lanes<true, kChunks> for every head of one row (q (nh, K), out
// (nh, E), K = E = 16 kChunks): each head's weights, then the values of
// as many heads at once as eight registers of sums hold.
template <int kChunks>
[[gnu::always_inline]] inline void attend_heads_zmm(const float* qrow, const float* keys, const float* values,
                                                    const int32_t* idx, int64_t len, int64_t nh, float scale,
                                                    float* w, int64_t w_stride, float* orow) {
  constexpr int64_t k = 16 * kChunks;
  constexpr int kGroup = kChunks >= 8 ? 1 : 8 / kChunks;
  for (int64_t h = 0; h < nh; ++h)
    weigh_lanes<true, kChunks>(qrow + h * k, keys, values, idx, len, nh, h, k, k, true, scale, w + h * w_stride);
  int64_t h0 = 0;
  for (; h0 + kGroup <= nh; h0 += kGroup)
    weigh_values_zmm<kChunks, kGroup>(values, idx, len, nh, h0, w, w_stride, orow);
  for (; h0 < nh; ++h0) weigh_values_zmm<kChunks, 1>(values, idx, len, nh, h0, w, w_stride, orow);
}

// attend_lanes with K = E = 16 kChunks in AVX2 registers: the same
// arithmetic lane for lane, so the same bits. Sixteen-float vectors there
// are pairs of registers that GCC moves through the stack wherever they are
// shuffled (sum16x16), and attention took a quarter of the demo model's
// decoding. Here key j's sixteen lanes are two halves whose sum is the first
// round of sum16x16's tree, and eight keys go through its other three
// rounds together, by shuffles of eight-float vectors.
template <int kChunks>
[[gnu::always_inline]] inline void weigh_ymm(const float* qr, const float* keys, const float* values,
                                             const int32_t* idx, int64_t len, int64_t nh, int64_t h, int64_t k,
                                             int64_t e, float scale, float* w) {
  F8 q[2 * kChunks];
#pragma GCC unroll 8
  for (int c = 0; c < 2 * kChunks; ++c) q[c] = load8(qr + 8 * c);
  for (int64_t j0 = 0; j0 < len; j0 += 8) {
    const int64_t n = std::min<int64_t>(8, len - j0);
    F8 s[8];
#pragma GCC unroll 8
    for (int64_t j = 0; j < 8; ++j) {
      s[j] = F8{};
      if (j >= n) continue;
      const float* kr = keys + (idx[j0 + j] * nh + h) * k;
      // The value this key weighs, for the loop after the softmax, and a
      // key further on: gathered rows are misses the loads would wait for.
      const float* vr = values + (idx[j0 + j] * nh + h) * e;
      for (int c = 0; c < kChunks; ++c) __builtin_prefetch(vr + 16 * c);
      if (j0 + j + 8 < len) {
        const float* ahead = keys + (idx[j0 + j + 8] * nh + h) * k;
        for (int c = 0; c < kChunks; ++c) __builtin_prefetch(ahead + 16 * c);
      }
      F8 lo = {}, hi = {};
#pragma GCC unroll 4
      for (int c = 0; c < kChunks; ++c) {
        lo += q[2 * c] * load8(kr + 16 * c);
        hi += q[2 * c + 1] * load8(kr + 16 * c + 8);
      }
      s[j] = lo + hi;  // lanes l and l + 8
    }
    F8 u[4], v[2];
    for (int i = 0; i < 4; ++i)  // lanes l and l + 4: keys 2i (lanes 0-3) and 2i + 1 (4-7)
      u[i] = __builtin_shufflevector(s[2 * i], s[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11) +
             __builtin_shufflevector(s[2 * i], s[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15);
    for (int i = 0; i < 2; ++i)  // l and l + 2: keys 4i, 4i + 2, 4i + 1, 4i + 3 (two lanes each)
      v[i] = __builtin_shufflevector(u[2 * i], u[2 * i + 1], 0, 1, 8, 9, 4, 5, 12, 13) +
             __builtin_shufflevector(u[2 * i], u[2 * i + 1], 2, 3, 10, 11, 6, 7, 14, 15);
    // l and l + 1, into key order
    const F8 d = scale * (__builtin_shufflevector(v[0], v[1], 0, 4, 2, 6, 8, 12, 10, 14) +
                          __builtin_shufflevector(v[0], v[1], 1, 5, 3, 7, 9, 13, 11, 15));
    std::memcpy(w + j0, &d, sizeof d);
  }
  softmax_blocks<F8>(w, len);
}

// attend_ymm's weighted values of kHeads heads h0.. of one row at once,
// as weigh_values_zmm does attend_lanes': the same bits.
template <int kChunks, int kHeads>
[[gnu::always_inline]] inline void weigh_values_ymm(const float* values, const int32_t* idx, int64_t len,
                                                    int64_t nh, int64_t h0, const float* w, int64_t w_stride,
                                                    float* o) {
  constexpr int64_t e = 16 * kChunks;
  F8 acc[kHeads][2 * kChunks] = {};
  for (int64_t j = 0; j < len; ++j) {
    const float* vr = values + (idx[j] * nh + h0) * e;
#pragma GCC unroll 8
    for (int hh = 0; hh < kHeads; ++hh) {
      const float wj = w[(h0 + hh) * w_stride + j];
#pragma GCC unroll 16
      for (int c = 0; c < 2 * kChunks; ++c) acc[hh][c] += wj * load8(vr + hh * e + 8 * c);
    }
  }
  std::memcpy(o + h0 * e, acc, sizeof acc);
}

// The weights (weigh_ymm), then the weighted values into o, whose sums
// add the keys in order as attend_lanes' do.
template <int kChunks>
[[gnu::always_inline]] inline void attend_ymm(const float* qr, const float* keys, const float* values,
                                              const int32_t* idx, int64_t len, int64_t nh, int64_t h,
                                              int64_t k, int64_t e, float scale, float* w, float* o) {
  weigh_ymm<kChunks>(qr, keys, values, idx, len, nh, h, k, e, scale, w);
  F8 acc[2 * kChunks] = {};
  for (int64_t j = 0; j < len; ++j) {
    const float* vr = values + (idx[j] * nh + h) * e;
    const float wj = w[j];
#pragma GCC unroll 16
    for (int c = 0; c < 2 * kChunks; ++c) acc[c] += wj * load8(vr + 8 * c);
  }
  std::memcpy(o, acc, sizeof acc);
}

// attend_heads_zmm on AVX2 registers: each head's weights (weigh_ymm),
// then the values of as many heads at once as eight registers of sums hold.
template <int kChunks>
[[gnu::always_inline]] inline void attend_heads_ymm(const float* qrow, const float* keys, const float* values,
                                                    const int32_t* idx, int64_t len, int64_t nh, float scale,
                                                    float* w, int64_t w_stride, float* orow) {
  constexpr int64_t k = 16 * kChunks;
  constexpr int kGroup = 2 * kChunks >= 8 ? 1 : 8 / (2 * kChunks);
  for (int64_t h = 0; h < nh; ++h)
    weigh_ymm<kChunks>(qrow + h * k, keys, values, idx, len, nh, h, k, k, scale, w + h * w_stride);
  int64_t h0 = 0;
  for (; h0 + kGroup <= nh; h0 += kGroup)
    weigh_values_ymm<kChunks, kGroup>(values, idx, len, nh, h0, w, w_stride, orow);
  for (; h0 < nh; ++h0) weigh_values_ymm<kChunks, 1>(values, idx, len, nh, h0, w, w_stride, orow);
}

TFM_WIDE_CLONES void attend_f32(const float* qr, const float* keys, const float* values,
                                const int32_t* idx, int64_t len, int64_t nh, int64_t h, int64_t k,
                                int64_t e, float scale, float* w, float* o) {
  // The head sizes of the presets and the demo's model, then any other.
  // (No lambda here: a lambda is compiled for the default target, not for
  // each clone's.)
  const int chunks = k == e && (k == 16 || k == 32 || k == 64) ? static_cast<int>(k / 16) : 0;
  const bool zmm = wide512();
  switch (chunks) {
    case 1:
      if (zmm) return attend_lanes<true, 1>(qr, keys, values, idx, len, nh, h, k, e, scale, w, o);
      return attend_ymm<1>(qr, keys, values, idx, len, nh, h, k, e, scale, w, o);
    case 2:
      if (zmm) return attend_lanes<true, 2>(qr, keys, values, idx, len, nh, h, k, e, scale, w, o);
      return attend_ymm<2>(qr, keys, values, idx, len, nh, h, k, e, scale, w, o);
    case 4:
      if (zmm) return attend_lanes<true, 4>(qr, keys, values, idx, len, nh, h, k, e, scale, w, o);
      return attend_ymm<4>(qr, keys, values, idx, len, nh, h, k, e, scale, w, o);
    default:
      if (zmm) return attend_lanes<true, 0>(qr, keys, values, idx, len, nh, h, k, e, scale, w, o);
      return attend_lanes<false, 0>(qr, keys, values, idx, len, nh, h, k, e, scale, w, o);
  }
}

// The same in f64 (tests): scalar, std::exp, sums in order.
void attend_f64(const double* qr, const double* keys, const double* values, const int32_t* idx,
                int64_t len, int64_t nh, int64_t h, int64_t k, int64_t e, double scale, double* w,
                double* o) {
  double mx = -INFINITY, sum = 0;
  for (int64_t j = 0; j < len; ++j) {
    w[j] = scale * dot(qr, keys + (idx[j] * nh + h) * k, k);
    mx = std::max(mx, w[j]);
  }
  for (int64_t j = 0; j < len; ++j) sum += (w[j] = std::exp(w[j] - mx));
  for (int64_t j = 0; j < len; ++j) {
    w[j] /= sum;
    const double* vr = values + (idx[j] * nh + h) * e;
    for (int64_t c = 0; c < e; ++c) o[c] += w[j] * vr[c];
  }
}

// Every head of one row (q (nh, K), out (nh, E), zeroed), head h's
// weights into w + h * w_stride: attend_heads_zmm (AVX-512) or
// attend_heads_ymm for the presets' head sizes (K = E = 16, 32 or 64),
// else attend_f32 a head at a time. The same bits every way.
TFM_WIDE_CLONES void attend_row_f32(const float* qrow, const float* keys, const float* values,
                                    const int32_t* idx, int64_t len, int64_t nh, int64_t k, int64_t e,
                                    float scale, float* w, int64_t w_stride, float* orow) {
  const int chunks = k == e && (k == 16 || k == 32 || k == 64) ? static_cast<int>(k / 16) : 0;
  const bool zmm = wide512();
  switch (chunks) {
    case 1:
      if (zmm) return attend_heads_zmm<1>(qrow, keys, values, idx, len, nh, scale, w, w_stride, orow);
      return attend_heads_ymm<1>(qrow, keys, values, idx, len, nh, scale, w, w_stride, orow);
    case 2:
      if (zmm) return attend_heads_zmm<2>(qrow, keys, values, idx, len, nh, scale, w, w_stride, orow);
      return attend_heads_ymm<2>(qrow, keys, values, idx, len, nh, scale, w, w_stride, orow);
    case 4:
      if (zmm) return attend_heads_zmm<4>(qrow, keys, values, idx, len, nh, scale, w, w_stride, orow);
      return attend_heads_ymm<4>(qrow, keys, values, idx, len, nh, scale, w, w_stride, orow);
    default:
      break;
  }
  for (int64_t h = 0; h < nh; ++h)
    attend_f32(qrow + h * k, keys, values, idx, len, nh, h, k, e, scale, w + h * w_stride, orow + h * e);
}

inline void attend_row(const float* qrow, const float* keys, const float* values, const int32_t* idx, int64_t len,
                       int64_t nh, int64_t k, int64_t e, float scale, float* w, int64_t w_stride, float* orow) {
  attend_row_f32(qrow, keys, values, idx, len, nh, k, e, scale, w, w_stride, orow);
}
inline void attend_row(const double* qrow, const double* keys, const double* values, const int32_t* idx,
                       int64_t len, int64_t nh, int64_t k, int64_t e, double scale, double* w, int64_t w_stride,
                       double* orow) {
  for (int64_t h = 0; h < nh; ++h)
    attend_f64(qrow + h * k, keys, values, idx, len, nh, h, k, e, scale, w + h * w_stride, orow + h * e);
}

template <typename T>
void attention_rows(const TensorView& q, const TensorView& keys, const TensorView& values,
                    const int32_t* index, const int32_t* lengths, const int32_t* groups,
                    int64_t list_len, float scale, const TensorView& out, const TensorView& probs) {
  const int64_t n = q.dim(0), nh = q.dim(1), k = q.dim(2), e = values.dim(2);
  const T* pq = q.data_as<T>();
  const T* pk = keys.data_as<T>();
  const T* pv = values.data_as<T>();
  T* po = out.data_as<T>();
  T* pp = probs.empty() ? nullptr : probs.data_as<T>();
  const T s = static_cast<T>(scale);
  // The keys actually read: lists may be longer than their lengths (the
  // decoder's self-attention lists are planned for every position).
  int64_t keys_read = 0;
  for (int64_t row = 0; row < n; ++row) keys_read += lengths[groups[row]];
  const int64_t work = keys_read * nh * (k + e);
#pragma omp parallel if (work > kParallelMin)
  {
    const int64_t w_stride = list_len + 16;  // attend_f32 writes whole vectors
    std::vector<T> w(static_cast<size_t>(nh * w_stride));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < n; ++row) {
      const int32_t g = groups[row];
      const int32_t* idx = index + g * list_len;
      const int64_t len = lengths[g];
      T* o = po + row * nh * e;
      std::fill(o, o + nh * e, T(0));
      if (len > 0) attend_row(pq + row * nh * k, pk, pv, idx, len, nh, k, e, s, w.data(), w_stride, o);
      if (pp)
        for (int64_t h = 0; h < nh; ++h) {
          T* pr = pp + (row * nh + h) * list_len;
          std::copy(w.begin() + h * w_stride, w.begin() + h * w_stride + len, pr);
          std::fill(pr + len, pr + list_len, T(0));
        }
    }
  }
}

// Whether any lane of a comparison's result is set.
[[gnu::always_inline]] inline bool any8(I8 m) {
  int32_t any = 0;
  for (int l = 0; l < 8; ++l) any |= m[l];
  return any != 0;
}

// The first j >= j0, in steps of 16, whose 16 values x[j, j + 16) hold one
// above kth; v - v % 16 (or j0) when none does: the top-k's screen. Eight
// vectors of eight a test, so that many loads are in flight (the logits
// come from memory), then the sixteen that hold it.
TFM_WIDE_CLONES int64_t next_above(const float* x, int64_t j0, int64_t v, float kth) {
  for (; j0 + 64 <= v; j0 += 64)
    if (any8((load8(x + j0) > kth) | (load8(x + j0 + 8) > kth) | (load8(x + j0 + 16) > kth) |
             (load8(x + j0 + 24) > kth) | (load8(x + j0 + 32) > kth) | (load8(x + j0 + 40) > kth) |
             (load8(x + j0 + 48) > kth) | (load8(x + j0 + 56) > kth)))
      break;
  for (; j0 + 16 <= v; j0 += 16)
    if (any8((load8(x + j0) > kth) | (load8(x + j0 + 8) > kth))) return j0;
  return j0;
}

// sum_j exp(x[j] - mx): sixteen float lanes over blocks of 64 terms, each
// block added into eight double lanes (lane l + 8 into l); the lanes meet in
// a fixed tree. The tail is padded with lanes that count 0.
[[gnu::always_inline]] inline double sum_exp_zmm(const float* x, int64_t v, float mx) {
  D8 acc = {};
  for (int64_t j0 = 0; j0 < v; j0 += 64) {
    F16 part = {};
    if (j0 + 64 <= v) {
      // A whole block: its four exponentials computed side by side (one at
      // a time, each polynomial's chain of dependent multiplies and adds
      // waited on the last's: perf found the loop latency-bound), then
      // added in order.
      F16 e[4];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) e[i] = exp_nonpositive<true>(load16(x + j0 + 16 * i) - mx);
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) part += e[i];
    } else {  // the last block, short
      for (int64_t j = j0; j < v; j += 16) {
        if (j + 16 <= v) {
          part += exp_nonpositive<true>(load16(x + j) - mx);
          continue;
        }
        float tail[16] = {};
        std::copy(x + j, x + v, tail);
        F16 e = exp_nonpositive<true>(load16(tail) - mx);
        for (int64_t l = v - j; l < 16; ++l) e[l] = 0.0f;
        part += e;
      }
    }
    const D8 lo = {part[0], part[1], part[2], part[3], part[4], part[5], part[6], part[7]};
    const D8 hi = {part[8], part[9], part[10], part[11], part[12], part[13], part[14], part[15]};
    acc += lo + hi;
  }
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// The same lanes and sums by AVX2 registers: the sixteen float lanes as
// halves a (0-7) and b (8-15), the eight double lanes as acc0 (0-3) and
// acc1 (4-7). Written with sixteen-float vectors, GCC moved the partial
// sums through the stack and general registers each block, which made the
// top-k's exponentials a large share of a small model's decoding.
[[gnu::always_inline]] inline double sum_exp_ymm(const float* x, int64_t v, float mx) {
  D4 acc0 = {}, acc1 = {};
  for (int64_t j0 = 0; j0 < v; j0 += 64) {
    F8 a = {}, b = {};
    if (j0 + 64 <= v) {
      // A whole block: its eight exponentials computed side by side (one
      // at a time, each waited on the last's polynomial), then added in
      // the order below.
      F8 e[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) e[i] = exp_lanes(load8(x + j0 + 8 * i) - mx);
#pragma GCC unroll 4
      for (int i = 0; i < 8; i += 2) {
        a += e[i];
        b += e[i + 1];
      }
    } else {  // the last block, short
      for (int64_t j = j0; j < v; j += 16) {
        if (j + 16 <= v) {
          a += exp_lanes(load8(x + j) - mx);
          b += exp_lanes(load8(x + j + 8) - mx);
          continue;
        }
        float tail[16] = {};
        std::copy(x + j, x + v, tail);
        F8 ea = exp_lanes(load8(tail) - mx), eb = exp_lanes(load8(tail + 8) - mx);
        for (int64_t l = v - j; l < 16; ++l) (l < 8 ? ea[l] : eb[l - 8]) = 0.0f;
        a += ea;
        b += eb;
      }
    }
    acc0 += __builtin_convertvector(__builtin_shufflevector(a, a, 0, 1, 2, 3), D4) +
            __builtin_convertvector(__builtin_shufflevector(b, b, 0, 1, 2, 3), D4);
    acc1 += __builtin_convertvector(__builtin_shufflevector(a, a, 4, 5, 6, 7), D4) +
            __builtin_convertvector(__builtin_shufflevector(b, b, 4, 5, 6, 7), D4);
  }
  return ((acc0[0] + acc1[0]) + (acc0[2] + acc1[2])) + ((acc0[1] + acc1[1]) + (acc0[3] + acc1[3]));
}

TFM_WIDE_CLONES double sum_exp(const float* x, int64_t v, float mx) {
  return wide512() ? sum_exp_zmm(x, v, mx) : sum_exp_ymm(x, v, mx);
}

// f64 (the tests' exact path): std::exp, summed in order.
double sum_exp(const double* x, int64_t v, double mx) {
  double sum = 0;
  for (int64_t j = 0; j < v; ++j) sum += std::exp(x[j] - mx);
  return sum;
}

// The k best of one row into (value, id) pairs, best first; ties: smaller id.
template <typename T>
void top_k(const T* x, int64_t v, int64_t k, std::vector<std::pair<T, int32_t>>& best) {
  best.clear();
  if (k > 64) {  // large k (exhaustive search in tests): a partial sort
    std::vector<int32_t> order(static_cast<size_t>(v));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return x[a] > x[b] || (x[a] == x[b] && a < b);
    });
    for (int64_t i = 0; i < k; ++i) best.emplace_back(x[order[static_cast<size_t>(i)]], order[static_cast<size_t>(i)]);
    return;
  }
  // Insertion into a sorted list; a later equal value has a larger id, so it
  // enters only when strictly larger. Chunks with no value above the k-th
  // are skipped after a vectorized comparison.
  constexpr int64_t kChunk = 16;
  auto insert = [&](T xj, int64_t j) {
    size_t pos = best.size();
    while (pos > 0 && xj > best[pos - 1].first) --pos;
    if (static_cast<int64_t>(best.size()) == k) best.pop_back();
    best.insert(best.begin() + static_cast<int64_t>(pos), {xj, static_cast<int32_t>(j)});
  };
  int64_t j0 = 0;
  for (; j0 < v && static_cast<int64_t>(best.size()) < k; ++j0) insert(x[j0], j0);
  for (; j0 < v; j0 += kChunk) {
    if constexpr (std::is_same_v<T, float>) {
      j0 = next_above(x, j0, v, best.back().first);
      if (j0 >= v) break;
    }
    for (int64_t j = j0; j < std::min(v, j0 + kChunk); ++j)
      if (x[j] > best.back().first) insert(x[j], j);
  }
}

}  // namespace
}  // namespace tfm::ops::cpu

namespace tfm::ops::impl {
using namespace cpu;  // the helpers above

template <>
void attention_gather<DeviceType::cpu>(const TensorView& q, const TensorView& keys,
                                       const TensorView& values, const TensorView& index,
                                       const TensorView& lengths, const TensorView& groups,
                                       float scale, const TensorView& out, const TensorView& probs,
                                       const Stream&) {
  const int64_t pool = keys.dim(0), ng = index.dim(0), list_len = index.dim(1);
  const int32_t* idx = index.data_as<int32_t>();
  const int32_t* len = lengths.data_as<int32_t>();
  const int32_t* grp = groups.data_as<int32_t>();
  for (int64_t n = 0; n < q.dim(0); ++n)
    TFM_REQUIRE(grp[n] >= 0 && grp[n] < ng, "attention_gather: groups[{}] is {}, outside [0, {}) (G)",
                n, grp[n], ng);
  for (int64_t g = 0; g < ng; ++g) {
    TFM_REQUIRE(len[g] >= 0 && len[g] <= list_len,
                "attention_gather: lengths[{}] is {}, outside [0, {}] (L)", g, len[g], list_len);
    for (int64_t j = 0; j < len[g]; ++j)
      TFM_REQUIRE(idx[g * list_len + j] >= 0 && idx[g * list_len + j] < pool,
                  "attention_gather: index[{}, {}] is {}, outside the pool [0, {})", g, j,
                  idx[g * list_len + j], pool);
  }
  with_float(out, "attention_gather", [&](auto* po) {
    using T = std::remove_pointer_t<decltype(po)>;
    attention_rows<T>(q, keys, values, idx, len, grp, list_len, scale, out, probs);
  });
}

template <>
void extend_history<DeviceType::cpu>(const TensorView& prev, const TensorView& parents,
                                     const TensorView& positions, const TensorView& slots,
                                     const TensorView& next, const TensorView& lengths,
                                     const Stream&) {
  const int64_t n = parents.numel(), rows = prev.dim(0), cols = prev.dim(1);
  const int32_t* par = parents.data_as<int32_t>();
  const int32_t* pos = positions.data_as<int32_t>();
  for (int64_t r = 0; r < n; ++r) {
    TFM_REQUIRE(pos[r] >= 0 && pos[r] < cols, "extend_history: positions[{}] is {}, outside the lists' [0, {})", r,
                pos[r], cols);
    TFM_REQUIRE(pos[r] == 0 || (par[r] >= 0 && par[r] < rows),
                "extend_history: parents[{}] is {}, outside [0, {})", r, par[r], rows);
  }
  const int32_t* from = prev.data_as<int32_t>();
  const int32_t* slot = slots.data_as<int32_t>();
  int32_t* to = next.data_as<int32_t>();
  int32_t* len = lengths.data_as<int32_t>();
  for (int64_t r = 0; r < n; ++r) {
    if (pos[r] > 0) std::copy_n(from + par[r] * cols, pos[r], to + r * cols);
    to[r * cols + pos[r]] = slot[r];
    len[r] = pos[r] + 1;
  }
}

template <>
void log_softmax_topk<DeviceType::cpu>(const TensorView& logits, const TensorView& values,
                                       const TensorView& ids, const TensorView& lse,
                                       const Stream&) {
  const int64_t n = logits.dim(0), v = logits.dim(1), k = values.dim(1);
  with_float(logits, "log_softmax_topk", [&](auto* px) {
    using T = std::remove_pointer_t<decltype(px)>;
    T* pvals = values.data_as<T>();
    T* plse = lse.data_as<T>();
    int32_t* pids = ids.data_as<int32_t>();
#pragma omp parallel if (n * v > kParallelMin)
    {
      std::vector<std::pair<T, int32_t>> best;
#pragma omp for schedule(static)
      for (int64_t r = 0; r < n; ++r) {
        const T* x = px + r * v;
        top_k(x, v, k, best);  // best[0] is the row's largest value
        const double row_lse = static_cast<double>(best[0].first) + std::log(sum_exp(x, v, best[0].first));
        plse[r] = static_cast<T>(row_lse);
        for (int64_t i = 0; i < k; ++i) {
          pvals[r * k + i] = static_cast<T>(best[static_cast<size_t>(i)].first - row_lse);
          pids[r * k + i] = best[static_cast<size_t>(i)].second;
        }
      }
    }
  });
}

}  // namespace tfm::ops::impl
