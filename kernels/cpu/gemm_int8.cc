// CPU int8 GEMM of inference (ops.h, "int8"): y = act(x W^T + bias) with W
// quantized once by rows and x quantized by rows on each call, the dot
// products summed exactly in int32. Integer sums have no order, so a row
// of y depends on its row of x alone, whatever the tiling, the other rows
// or the threads: the fp32 decoder's batch invariance holds in int8 too.
//
// AVX2 has no signed x signed byte product; vpmaddubsw multiplies unsigned
// by signed bytes and adds pairs into saturating int16, then vpmaddwd by
// ones widens the pairs into the int32 sums: 32 products in two multiply
// instructions. x is quantized to [-63, 63] (kInt8InputLimit) and fed as
// x + 64, in [1, 127], so a pair is at most 2 * 127 * 127 = 32258, under
// int16's 32767, and the sum over a row is sum x w + 64 sum w; W's row sums
// (Int8Matrix::sums) take the 64 sum w back off, exactly. (Moving x's sign
// onto W's byte instead, vpsignb, is a third multiply-port instruction a
// product: 1.5x the time on AMD's Zen 3, which has two such ports.)
//
// The float epilogue, y = float(sum) * (sx * sw) + b (then ReLU), is the
// same operations in the same order on both paths (the file is compiled
// with -ffp-contract=off), so the AVX2 and portable paths agree bit for bit.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/detail.h"

namespace tfm::ops::cpu {
namespace {

constexpr int64_t kTileRows = 2, kTileCols = 4;
constexpr int64_t kBlockCols = 16;  // W rows a thread takes at once

// The rows of x, quantized: the values, for AVX2 the values plus 64 (see
// above), and the scales. Each row padded with zeros to ld (x + 64 pads
// with 64, against W's zeros).
constexpr int kShiftBits = 6, kShift = 1 << kShiftBits;
static_assert(kInt8InputLimit + kShift <= 127, "x + 64 must fit vpmaddubsw's pairs into int16");
struct QuantizedRows {
  std::vector<int8_t> values;
  std::vector<uint8_t> shifted;
  std::vector<float> scales;
  int64_t ld = 0;
};

struct Epilogue {
  const float* x_scales;
  const float* w_scales;
  const float* bias;
  bool relu;
  float apply(int32_t sum, int64_t i, int64_t j) const {
    const float s = x_scales[i] * w_scales[j];
    float v = static_cast<float>(sum) * s;
    if (bias) v = v + bias[j];
    return relu ? std::max(v, 0.0f) : v;
  }
};

int32_t dot_portable(const int8_t* a, const int8_t* b, int64_t n) {
  int32_t s = 0;
  for (int64_t p = 0; p < n; ++p) s += int32_t{a[p]} * int32_t{b[p]};
  return s;
}

void block_portable(const QuantizedRows& x, const Int8Matrix& w, float* y, int64_t ldy,
                    const Epilogue& e, int64_t m, int64_t j0, int64_t j1) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = j0; j < j1; ++j)
      y[i * ldy + j] = e.apply(dot_portable(x.values.data() + i * x.ld, w.values + j * w.ld, w.cols), i, j);
}

#if defined(__x86_64__)
template <int R, int C>
[[gnu::target("avx2")]] void tile_avx2(const QuantizedRows& x, const Int8Matrix& w, float* y, int64_t ldy,
                                       const Epilogue& e, int64_t i, int64_t j) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < C; ++q) acc[r][q] = _mm256_setzero_si256();
  const uint8_t* xr[R];
  const int8_t* wr[C];
  for (int r = 0; r < R; ++r) xr[r] = x.shifted.data() + (i + r) * x.ld;
  for (int q = 0; q < C; ++q) wr[q] = w.values + (j + q) * w.ld;
  for (int64_t p = 0; p < w.ld; p += kInt8RowAlign) {
    __m256i xv[R];
    for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr[r] + p));
    for (int q = 0; q < C; ++q) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[q] + p));
      for (int r = 0; r < R; ++r)
        acc[r][q] = _mm256_add_epi32(acc[r][q], _mm256_madd_epi16(_mm256_maddubs_epi16(xv[r], wv), ones));
    }
  }
  if constexpr (R == 2 && C == 4) {
    // The eight sums at once: pairwise adds twice, then the halves.
    const __m256i t0 = _mm256_hadd_epi32(acc[0][0], acc[0][1]), t1 = _mm256_hadd_epi32(acc[0][2], acc[0][3]);
    const __m256i t2 = _mm256_hadd_epi32(acc[1][0], acc[1][1]), t3 = _mm256_hadd_epi32(acc[1][2], acc[1][3]);
    const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
    const __m256i sums = _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                                          _mm256_permute2x128_si256(u0, u1, 0x31));
    const __m128i shift = _mm_slli_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.sums + j)), kShiftBits);
    const __m128i half[2] = {_mm_sub_epi32(_mm256_castsi256_si128(sums), shift),
                             _mm_sub_epi32(_mm256_extracti128_si256(sums, 1), shift)};
    const __m128 w_scale = _mm_loadu_ps(e.w_scales + j);
    for (int r = 0; r < 2; ++r) {  // apply(), four columns at once
      const __m128 s = _mm_mul_ps(_mm_set1_ps(e.x_scales[i + r]), w_scale);
      __m128 v = _mm_mul_ps(_mm_cvtepi32_ps(half[r]), s);
      if (e.bias) v = _mm_add_ps(v, _mm_loadu_ps(e.bias + j));
      if (e.relu) v = _mm_max_ps(_mm_setzero_ps(), v);  // v < 0 ? 0 : v, as std::max(v, 0)
      _mm_storeu_ps(y + (i + r) * ldy + j, v);
    }
  } else {
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < C; ++q) {
        alignas(32) int32_t lane[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(lane), acc[r][q]);
        int32_t sum = -kShift * w.sums[j + q];
        for (int32_t v : lane) sum += v;
        y[(i + r) * ldy + j + q] = e.apply(sum, i + r, j + q);
      }
  }
}

template <int R>
[[gnu::target("avx2")]] void row_tiles_avx2(const QuantizedRows& x, const Int8Matrix& w, float* y, int64_t ldy,
                                            const Epilogue& e, int64_t i, int64_t j0, int64_t j1) {
  int64_t j = j0;
  for (; j + kTileCols <= j1; j += kTileCols) tile_avx2<R, kTileCols>(x, w, y, ldy, e, i, j);
  for (; j < j1; ++j) tile_avx2<R, 1>(x, w, y, ldy, e, i, j);
}

[[gnu::target("avx2")]] void block_avx2(const QuantizedRows& x, const Int8Matrix& w, float* y, int64_t ldy,
                                        const Epilogue& e, int64_t m, int64_t j0, int64_t j1) {
  int64_t i = 0;
  for (; i + kTileRows <= m; i += kTileRows) row_tiles_avx2<kTileRows>(x, w, y, ldy, e, i, j0, j1);
  for (; i < m; ++i) row_tiles_avx2<1>(x, w, y, ldy, e, i, j0, j1);
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

// Quantization, in three steps both paths share: the largest magnitude
// (and whether any value is inf or NaN), the values v * (127 / amax)
// rounded to nearest even and clamped, the scale amax / 127.
struct RowRange {
  float amax = 0.0f;
  bool bad = false;  // an inf or NaN: the row's results are NaN
};

RowRange range_portable(const float* v, int64_t p, int64_t n, RowRange r) {
  for (; p < n; ++p) {
    const float a = std::fabs(v[p]);
    r.bad = r.bad || !(a < std::numeric_limits<float>::infinity());
    r.amax = std::max(r.amax, a);
  }
  return r;
}

void round_portable(const float* v, int64_t p, int64_t n, float inv, int8_t* q, float limit) {
  for (; p < n; ++p) q[p] = static_cast<int8_t>(std::clamp(std::nearbyint(v[p] * inv), -limit, limit));
}

#if defined(__x86_64__)
[[gnu::target("avx2")]] RowRange range_avx2(const float* v, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f), inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  __m256 amax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= n; p += 8) {
    const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(v + p));
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ));
    amax = _mm256_max_ps(amax, a);  // exact; a NaN lane is caught by `bad`
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, amax);
  RowRange r;
  for (float a : lanes) r.amax = std::max(r.amax, a);
  r.bad = _mm256_movemask_ps(bad) != 0;
  return range_portable(v, p, n, r);
}

// cvtps rounds to nearest even (the default MXCSR mode), as nearbyint; the
// products are within [-limit, limit] plus rounding, so clamping the
// integers is clamping the floats.
[[gnu::target("avx2")]] void round_avx2(const float* v, int64_t n, float inv, int8_t* q, int limit) {
  const __m256 scale = _mm256_set1_ps(inv);
  const __m256i lo = _mm256_set1_epi32(-limit), hi = _mm256_set1_epi32(limit);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // undoes the packs' lane interleave
  int64_t p = 0;
  for (; p + 32 <= n; p += 32) {
    __m256i x[4];
    for (int g = 0; g < 4; ++g)
      x[g] = _mm256_min_epi32(hi, _mm256_max_epi32(lo, _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + p + 8 * g), scale))));
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(x[0], x[1]), _mm256_packs_epi32(x[2], x[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + p), _mm256_permutevar8x32_epi32(bytes, order));
  }
  round_portable(v, p, n, inv, q, static_cast<float>(limit));
}

[[gnu::target("avx2")]] void shifted_avx2(const int8_t* q, int64_t ld, uint8_t* u) {
  const __m256i shift = _mm256_set1_epi8(kShift);
  for (int64_t p = 0; p < ld; p += kInt8RowAlign)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(u + p),
                        _mm256_add_epi8(shift, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + p))));
}
#endif

}  // namespace

float quantize_row_int8(const float* v, int64_t n, int8_t* q, int64_t ld, bool simd, int limit) {
#if defined(__x86_64__)
  simd = simd && has_avx2();
  const RowRange r = simd ? range_avx2(v, n) : range_portable(v, 0, n, {});
#else
  simd = false;
  const RowRange r = range_portable(v, 0, n, {});
#endif
  std::memset(q, 0, static_cast<size_t>(ld));
  if (r.bad) return std::numeric_limits<float>::quiet_NaN();
  if (r.amax == 0.0f) return 0.0f;
  const float top = static_cast<float>(limit), inv = top / r.amax;
#if defined(__x86_64__)
  if (simd) {
    round_avx2(v, n, inv, q, limit);
    return r.amax / top;
  }
#endif
  round_portable(v, 0, n, inv, q, top);
  return r.amax / top;
}

bool gemm_int8_simd() {
#if defined(__x86_64__)
  return has_avx2();
#else
  return false;
#endif
}

void gemm_int8(const float* x, int64_t m, int64_t ldx, const Int8Matrix& w, float* y, int64_t ldy,
               const float* bias, bool relu, bool simd) {
#if defined(__x86_64__)
  simd = simd && has_avx2();
#else
  simd = false;
#endif
  // The caller's buffer, named by a plain reference: inside the parallel
  // region a thread_local would name each worker's own (empty) one.
  thread_local QuantizedRows buffer;
  QuantizedRows& q = buffer;
  q.ld = w.ld;
  q.values.resize(static_cast<size_t>(m * q.ld));
  q.scales.resize(static_cast<size_t>(m));
  if (simd) q.shifted.resize(q.values.size());
  for (int64_t i = 0; i < m; ++i) {
    int8_t* row = q.values.data() + i * q.ld;
    q.scales[static_cast<size_t>(i)] = quantize_row_int8(x + i * ldx, w.cols, row, q.ld, simd, kInt8InputLimit);
#if defined(__x86_64__)
    if (simd) shifted_avx2(row, q.ld, q.shifted.data() + i * q.ld);
#endif
  }
  const Epilogue e{q.scales.data(), w.scales, bias, relu};
  // As gemm_rows.cc: threads take blocks of W's rows and run every row of x
  // against them.
  const int64_t blocks = (w.rows + kBlockCols - 1) / kBlockCols;
  const bool parallel = m * w.rows * w.cols > (int64_t{1} << 19);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t j0 = blk * kBlockCols, j1 = std::min(w.rows, j0 + kBlockCols);
#if defined(__x86_64__)
    if (simd) {
      block_avx2(q, w, y, ldy, e, m, j0, j1);
      continue;
    }
#endif
    block_portable(q, w, y, ldy, e, m, j0, j1);
  }
}

}  // namespace tfm::ops::cpu
