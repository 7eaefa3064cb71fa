// CPU GEMM whose rows do not see each other (GemmOptions::row_invariant):
// C = act(alpha * A B^T + beta * C + bias) with every element a dot product
// of a row of A and a row of B computed in one fixed order, so a row of C
// has the same bits whatever the other rows are, how many there are, where
// it sits among them and how many threads run. The decoder needs that for
// batch invariance, and OpenBLAS does not give it: its kernels sum an
// element differently by its column's place in a register block (measured
// on the Zen / Haswell sgemm of OpenBLAS 0.3.21: a period of 12 rows, half
// of them one way, and other sums in the tails).
//
// The order of element (i, j): eight lanes, lane l the products of
// k = l (mod 8) added in order by fused multiply-adds; the lanes added by a
// fixed tree ((0+1) + (2+3)) + ((4+5) + (6+7)) (what two rounds of AVX's
// pairwise adds and one of halves give, eight elements at once); the k % 8
// last products fused onto that in order; then alpha, beta C and the bias
// (and ReLU). AVX2 computes
// it eight lanes to a register, the portable path lane by lane with
// std::fma: both give the same bits on every x86-64 (and any other CPU).
// B's rows are read as they lie (a weight matrix (N, K)): nothing is
// packed, so nothing is repacked on every call.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/detail.h"

namespace tfm::ops::cpu {
namespace {

constexpr int kLanes = 8;
constexpr int64_t kTileRows = 2, kTileCols = 4;  // 8 accumulators a tile
constexpr int64_t kBlockCols = 16;                // B rows a thread takes at once

template <typename T>
struct Epilogue {
  T alpha, beta;
  const T* bias;
  bool relu;
  T apply(T dot, const T* c, int64_t j) const {
    T v = alpha == T(1) ? dot : alpha * dot;
    if (beta != T(0)) v += beta * *c;
    if (bias) v += bias[j];
    return relu ? std::max(v, T(0)) : v;
  }
};

// The k % 8 last products, fused onto the lanes' sum in order.
template <typename T>
T tail(T s, const T* a, const T* b, int64_t k0, int64_t k) {
  for (int64_t p = k0; p < k; ++p) s = std::fma(a[p], b[p], s);
  return s;
}

// The lanes' tree and the tail: `lane` holds the eight lane sums of the
// whole vectors.
template <typename T>
T finish(const T* lane, const T* a, const T* b, int64_t k0, int64_t k) {
  return tail(((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7])),
              a, b, k0, k);
}

// Rows [i0, i1) x columns [j0, j1), lane by lane.
template <typename T>
void block_portable(const GemmShape& s, const T* a, const T* b, T* c, const Epilogue<T>& e,
                    int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  const int64_t k8 = s.k / kLanes * kLanes;
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t j = j0; j < j1; ++j) {
      const T* ar = a + i * s.lda;
      const T* br = b + j * s.ldb;
      T lane[kLanes] = {};
      for (int64_t p = 0; p < k8; p += kLanes)
        for (int l = 0; l < kLanes; ++l) lane[l] = std::fma(ar[p + l], br[p + l], lane[l]);
      T* cp = c + i * s.ldc + j;
      *cp = e.apply(finish(lane, ar, br, k8, s.k), cp, j);
    }
}

#if defined(__x86_64__)
// A tile of R x C elements, eight lanes to a register.
template <int R, int C>
[[gnu::target("avx2,fma")]] void tile_avx2(const GemmShape& s, const float* a, const float* b,
                                            float* c, const Epilogue<float>& e, int64_t i, int64_t j) {
  const int64_t k8 = s.k / kLanes * kLanes;
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < C; ++q) acc[r][q] = _mm256_setzero_ps();
  const float* ar[R];
  const float* br[C];
  for (int r = 0; r < R; ++r) ar[r] = a + (i + r) * s.lda;
  for (int q = 0; q < C; ++q) br[q] = b + (j + q) * s.ldb;
  for (int64_t p = 0; p < k8; p += kLanes) {
    __m256 x[R], w[C];
    for (int r = 0; r < R; ++r) x[r] = _mm256_loadu_ps(ar[r] + p);
    for (int q = 0; q < C; ++q) w[q] = _mm256_loadu_ps(br[q] + p);
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < C; ++q) acc[r][q] = _mm256_fmadd_ps(x[r], w[q], acc[r][q]);
  }
  if constexpr (R == 2 && C == 4) {
    // The eight trees at once: pairwise adds twice, then the halves.
    const __m256 t0 = _mm256_hadd_ps(acc[0][0], acc[0][1]), t1 = _mm256_hadd_ps(acc[0][2], acc[0][3]);
    const __m256 t2 = _mm256_hadd_ps(acc[1][0], acc[1][1]), t3 = _mm256_hadd_ps(acc[1][2], acc[1][3]);
    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    const __m256 sums = _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
    if (k8 == s.k) {  // no tail: the epilogue as apply() does it, four columns at once
      const __m128 half[2] = {_mm256_castps256_ps128(sums), _mm256_extractf128_ps(sums, 1)};
      for (int r = 0; r < 2; ++r) {
        float* cp = c + (i + r) * s.ldc + j;
        __m128 v = half[r];
        if (e.alpha != 1.0f) v = _mm_mul_ps(_mm_set1_ps(e.alpha), v);
        if (e.beta != 0.0f) v = _mm_add_ps(v, _mm_mul_ps(_mm_set1_ps(e.beta), _mm_loadu_ps(cp)));
        if (e.bias) v = _mm_add_ps(v, _mm_loadu_ps(e.bias + j));
        if (e.relu) v = _mm_max_ps(_mm_setzero_ps(), v);  // v < 0 ? 0 : v, as std::max(v, 0)
        _mm_storeu_ps(cp, v);
      }
      return;
    }
    alignas(32) float sum[8];
    _mm256_store_ps(sum, sums);
    for (int r = 0; r < 2; ++r)
      for (int q = 0; q < 4; ++q) {
        float* cp = c + (i + r) * s.ldc + j + q;
        *cp = e.apply(tail(sum[r * 4 + q], ar[r], br[q], k8, s.k), cp, j + q);
      }
  } else {
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < C; ++q) {
        alignas(32) float lane[kLanes];
        _mm256_store_ps(lane, acc[r][q]);
        float* cp = c + (i + r) * s.ldc + j + q;
        *cp = e.apply(finish(lane, ar[r], br[q], k8, s.k), cp, j + q);
      }
  }
}

template <int R>
[[gnu::target("avx2,fma")]] void row_tiles_avx2(const GemmShape& s, const float* a, const float* b,
                                                 float* c, const Epilogue<float>& e, int64_t i, int64_t j0,
                                                 int64_t j1) {
  int64_t j = j0;
  for (; j + kTileCols <= j1; j += kTileCols) tile_avx2<R, kTileCols>(s, a, b, c, e, i, j);
  for (; j < j1; ++j) tile_avx2<R, 1>(s, a, b, c, e, i, j);
}

[[gnu::target("avx2,fma")]] void block_avx2(const GemmShape& s, const float* a, const float* b,
                                             float* c, const Epilogue<float>& e, int64_t i0, int64_t i1,
                                             int64_t j0, int64_t j1) {
  int64_t i = i0;
  for (; i + kTileRows <= i1; i += kTileRows) row_tiles_avx2<kTileRows>(s, a, b, c, e, i, j0, j1);
  for (; i < i1; ++i) row_tiles_avx2<1>(s, a, b, c, e, i, j0, j1);
}

bool has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
#endif

}  // namespace

bool gemm_row_invariant_simd() {
#if defined(__x86_64__)
  return has_avx2_fma();
#else
  return false;
#endif
}

template <typename T>
void gemm_row_invariant(const GemmShape& s, const T* a, const T* b, T* c, const T* bias,
                        const GemmOptions& o, bool simd) {
  const Epilogue<T> e{static_cast<T>(o.alpha), static_cast<T>(o.beta), bias, o.relu};
#if defined(__x86_64__)
  simd = simd && std::is_same_v<T, float> && has_avx2_fma();
#else
  simd = false;
#endif
  // Threads take blocks of B's rows (C's columns) and run every row of A
  // against them: the block stays in cache while A streams.
  const int64_t blocks = (s.n + kBlockCols - 1) / kBlockCols;
  const bool parallel = s.m * s.n * s.k > (int64_t{1} << 18);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t j0 = blk * kBlockCols, j1 = std::min(s.n, j0 + kBlockCols);
#if defined(__x86_64__)
    if constexpr (std::is_same_v<T, float>)
      if (simd) {
        block_avx2(s, a, b, c, e, 0, s.m, j0, j1);
        continue;
      }
#endif
    block_portable(s, a, b, c, e, 0, s.m, j0, j1);
  }
}

template void gemm_row_invariant<float>(const GemmShape&, const float*, const float*, float*,
                                        const float*, const GemmOptions&, bool);
template void gemm_row_invariant<double>(const GemmShape&, const double*, const double*, double*,
                                         const double*, const GemmOptions&, bool);

}  // namespace tfm::ops::cpu
