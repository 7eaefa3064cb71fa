// The panel both CPU GEMMs run a tile of rows against (gemm_rows.cc: floats;
// gemm_int8.cc: int8 weights in groups of four bytes, one 32-bit element a
// group): 16 rows of a matrix, element p of row q at panel[p * 16 + q], so
// that one step of a tile loads the 16 rows' element p as two AVX2
// registers and broadcasts the other operand against them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "libcore/base/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tfm::ops::cpu {

constexpr int64_t kPanel = 16;  // rows of a panel: two AVX2 registers of 32-bit elements

// The GEMMs' per-call buffers, one thread_local each (scratch below).
enum class ScratchUse {
  row_panels, row_tiles_of_a,                             // gemm_rows.cc
  int8_values, int8_shifted, int8_scales, int8_panels,  // gemm_int8.cc
};

// The calling thread's memory for one use: at least n elements, 64-byte
// aligned, contents undefined, kept from call to call. Once it has reached
// the largest size a decoder asks for, no call allocates, zeroes or faults
// in a page. (A std::vector resized between a decoder's shapes, K = 512
// then 2048, zero-filled the difference every call, and each time it grew
// moved its contents to fresh pages the kernel had to clear.)
template <typename T, ScratchUse kUse>
T* scratch(int64_t n) {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<T, Free> memory;
  thread_local int64_t size = 0;
  if (n > size) {
    const size_t bytes = (sizeof(T) * static_cast<size_t>(n) + 63) / 64 * 64;
    memory.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
    TFM_REQUIRE(memory, "gemm: no memory for {} bytes of scratch", bytes);
    size = n;
  }
  return memory.get();
}

// Rows src[q * ld, q * ld + k), q < cols <= 16, of any element type, into
// panel (k * 16), one element at a time; the rows past cols are zero. (The
// copy is memcpy's: int8 weights come here as int32 groups, read as bytes.)
template <typename T>
void pack_panel16(const T* src, int64_t ld, int64_t k, int64_t cols, T* panel) {
  if (cols < kPanel) std::memset(static_cast<void*>(panel), 0, sizeof(T) * static_cast<size_t>(k * kPanel));
  for (int64_t q = 0; q < cols; ++q)
    for (int64_t p = 0; p < k; ++p) std::memcpy(panel + p * kPanel + q, src + q * ld + p, sizeof(T));
}

#if defined(__x86_64__)
// pack_panel16 for a whole panel of 32-bit elements (float, or four int8
// as an int32): eight rows by eight elements at a time, transposed in
// registers (the same bits moved, nothing computed).
template <typename T>
[[gnu::target("avx2")]] void pack_panel16_avx2(const T* src, int64_t ld, int64_t k, T* panel) {
  static_assert(sizeof(T) == 4, "a panel holds 32-bit elements");
  const int64_t k8 = k / 8 * 8;
  for (int64_t half = 0; half < kPanel; half += 8) {
    const T* row = src + half * ld;
    for (int64_t p = 0; p < k8; p += 8) {
      __m256 r[8], t[8];
      for (int q = 0; q < 8; ++q) r[q] = _mm256_loadu_ps(reinterpret_cast<const float*>(row + q * ld + p));
      for (int q = 0; q < 8; q += 2) {
        t[q] = _mm256_unpacklo_ps(r[q], r[q + 1]);      // q0 q1 at k 0, 1 | 4, 5
        t[q + 1] = _mm256_unpackhi_ps(r[q], r[q + 1]);  // q0 q1 at k 2, 3 | 6, 7
      }
      for (int q = 0; q < 8; q += 4) {
        r[q] = _mm256_shuffle_ps(t[q], t[q + 2], 0x44);          // q0..q3 at k 0 | 4
        r[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], 0xEE);      // k 1 | 5
        r[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0x44);  // k 2 | 6
        r[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0xEE);  // k 3 | 7
      }
      float* out = reinterpret_cast<float*>(panel + p * kPanel + half);
      for (int q = 0; q < 4; ++q) {
        _mm256_storeu_ps(out + q * kPanel, _mm256_permute2f128_ps(r[q], r[q + 4], 0x20));
        _mm256_storeu_ps(out + (q + 4) * kPanel, _mm256_permute2f128_ps(r[q], r[q + 4], 0x31));
      }
    }
    for (int64_t q = 0; q < 8; ++q)  // (memcpy: int8 bytes are read as a T only by the intrinsics)
      for (int64_t p = k8; p < k; ++p) std::memcpy(panel + p * kPanel + half + q, row + q * ld + p, sizeof(T));
  }
}
#endif

// Rows src[q * ld, q * ld + k), q < rows, into panels of 16 rows, panel h
// at out + h * k * 16 (the last one's rows past `rows` zero): whole panels
// of 32-bit elements by AVX2 where the CPU has it, the rest one element at
// a time; the same bytes either way.
template <typename T>
void pack_panels(const T* src, int64_t rows, int64_t ld, int64_t k, T* out) {
  for (int64_t j0 = 0; j0 < rows; j0 += kPanel) {
    const int64_t n = std::min(kPanel, rows - j0);
#if defined(__x86_64__)
    if constexpr (sizeof(T) == 4) {
      static const bool avx2 = __builtin_cpu_supports("avx2");
      if (n == kPanel && avx2) {
        pack_panel16_avx2(src + j0 * ld, ld, k, out + j0 * k);
        continue;
      }
    }
#endif
    pack_panel16(src + j0 * ld, ld, k, n, out + j0 * k);
  }
}

}  // namespace tfm::ops::cpu
