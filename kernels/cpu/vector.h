// The CPU ops' inner loops, compiled for the vector units a user's CPU has.
//
// tfm ships one portable binary, built for baseline x86-64 (SSE2). A function
// marked TFM_CPU_CLONES is compiled three times, for x86-64-v4 (AVX-512),
// x86-64-v3 (AVX2 + FMA) and the baseline, and the dynamic loader picks one
// by the CPU at start (GCC function multiversioning, an ifunc): the user does
// nothing, as for OpenBLAS's core (kernels/cpu/blas.cc).
//
// Each such function is one row or one chunk of an op: OpenMP splits the work
// outside it, so results do not depend on the thread count or on the rest of
// the batch. Sums take a fixed order written out in lanes (sum_lanes), and
// libcore builds with -ffp-contract=off (no fused multiply-add), so the three
// clones do the same operations in the same order and give the same bits
// (resume and batch invariance rely on it). OpenBLAS's GEMM kernels, picked
// per core, are another matter.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TFM_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TFM_CPU_CLONES
#endif

namespace tfm::ops::cpu {

// exp(x) for float in straight-line code that vectorizes (std::exp is a
// call the compiler cannot vectorize without -ffast-math). Cody-Waite range
// reduction x = n ln2 + r, |r| <= ln2 / 2, and Cephes' degree-6 polynomial
// for e^r: within 2 ulp of the exact value for x in [-87.3, 88.7]; 0 below
// (where exp(x) would be subnormal) and +inf above.
inline float exp_approx(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  constexpr float kLo = -87.3365447f, kHi = 88.7228394f;
  const float xc = x < kLo ? kLo : (x > kHi ? kHi : x);
  float fn = xc * kLog2e + kShift;
  int32_t n;
  std::memcpy(&n, &fn, sizeof n);
  n -= 0x4B400000;  // the bits of kShift: n = round(x / ln2)
  fn -= kShift;
  const float r = (xc - fn * kLn2Hi) - fn * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n in two halves, so n = 128 (x near kHi) does not overflow the exponent.
  const int32_t n1 = n >> 1, n2 = n - n1;
  const int32_t b1 = (n1 + 127) << 23, b2 = (n2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, sizeof s1);
  std::memcpy(&s2, &b2, sizeof s2);
  const float y = p * s1 * s2;
  return x < kLo ? 0.0f : (x > kHi ? __builtin_inff() : y);
}

// sum_{j < n} f(j) in double, in a fixed order: sixteen lanes (lane j mod
// 16) over the whole blocks of sixteen, then the tail, then the lanes in
// order. Written with explicit lanes because the compiler does not
// vectorize an `omp simd` reduction into double of float terms. f may write
// element j as a side effect (e.g. store exp(x_j) while summing it).
template <typename F>
inline double sum_lanes(int64_t n, F&& f) {
  constexpr int kLanes = 16;
  double acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    decltype(f(j)) term[kLanes];  // two loops: each vectorizes on its own
    for (int l = 0; l < kLanes; ++l) term[l] = f(j + l);
    for (int l = 0; l < kLanes; ++l) acc[l] += term[l];
  }
  double tail = 0;
  for (; j < n; ++j) tail += f(j);
  double sum = 0;
  for (int l = 0; l < kLanes; ++l) sum += acc[l];
  return sum + tail;
}

// max_{j < n} x_j (n >= 1) in lanes, as sum_lanes. A NaN is skipped here;
// callers that also sum x still see it.
template <typename T>
inline T max_lanes(const T* x, int64_t n) {
  constexpr int kLanes = 16;
  T acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = x[0];
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
  T mx = x[0];
  for (; j < n; ++j) mx = x[j] > mx ? x[j] : mx;
  for (int l = 0; l < kLanes; ++l) mx = acc[l] > mx ? acc[l] : mx;
  return mx;
}

// exp in the vectorizing form for float; double (the tests' reference
// dtype) keeps the library's exp.
inline float exp_fast(float x) { return exp_approx(x); }
inline double exp_fast(double x) { return std::exp(x); }

}  // namespace tfm::ops::cpu
