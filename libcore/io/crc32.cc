#include "libcore/io/crc32.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TFM_CRC32_CLMUL 1
#endif

namespace tfm::io {

namespace {

// ---- tables: slicing by 8, on the raw (not inverted) register ----

struct CrcTables {
  uint32_t t[8][256];
};
constexpr CrcTables make_crc_tables() {
  CrcTables c{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t r = i;
    for (int k = 0; k < 8; ++k) r = (r >> 1) ^ (0xEDB88320u & (0u - (r & 1u)));
    c.t[0][i] = r;
  }
  for (int k = 1; k < 8; ++k)
    for (int i = 0; i < 256; ++i) c.t[k][i] = (c.t[k - 1][i] >> 8) ^ c.t[0][c.t[k - 1][i] & 0xff];
  return c;
}
constexpr CrcTables kCrc = make_crc_tables();

uint32_t crc_tables(uint32_t crc, const unsigned char* p, size_t n) {
  for (; n >= 8; p += 8, n -= 8) {
    const uint32_t a = crc ^ (uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 |
                              uint32_t{p[3]} << 24);
    const uint32_t b = uint32_t{p[4]} | uint32_t{p[5]} << 8 | uint32_t{p[6]} << 16 |
                       uint32_t{p[7]} << 24;
    crc = kCrc.t[7][a & 0xff] ^ kCrc.t[6][(a >> 8) & 0xff] ^ kCrc.t[5][(a >> 16) & 0xff] ^
          kCrc.t[4][a >> 24] ^ kCrc.t[3][b & 0xff] ^ kCrc.t[2][(b >> 8) & 0xff] ^
          kCrc.t[1][(b >> 16) & 0xff] ^ kCrc.t[0][b >> 24];
  }
  for (; n > 0; --n) crc = kCrc.t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return crc;
}

#ifdef TFM_CRC32_CLMUL

// Folding with carry-less multiplication (Gopal et al., "Fast CRC
// Computation for Generic Polynomials Using PCLMULQDQ", Intel 2009), for
// the bit-reflected polynomial: four 128-bit lanes are folded 512 bits
// ahead while there are 64 bytes, then into one lane, 128 bits at a time,
// then 128 -> 64 -> 32 bits and a Barrett reduction. The constants are
// x^k mod P for the fold distances (k = 4*128+32 and 4*128-32 for the wide
// fold, 128+32 and 128-32 for the narrow one, 64 for the last) and the
// Barrett pair P' and u' = floor(x^64 / P), all bit-reflected.
// Needs n >= 64 and a multiple of 16; works on the raw register.
#define TFM_CLMUL __attribute__((target("pclmul,sse4.1")))

TFM_CLMUL inline __m128i load(const unsigned char* at) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
}
// x's two halves times k's, moved `k`'s distance ahead, onto `next`.
TFM_CLMUL inline __m128i fold(__m128i x, __m128i k, __m128i next) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), next);
}

TFM_CLMUL uint32_t crc_clmul(uint32_t crc, const unsigned char* p, size_t n) {
  const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
  const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
  const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124);
  const __m128i poly = _mm_set_epi64x(0x1f7011641, 0x1db710641);  // u', P'
  const __m128i low32 = _mm_set_epi32(0, 0, 0, -1);
  __m128i x1 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(int(crc)));
  __m128i x2 = load(p + 16), x3 = load(p + 32), x4 = load(p + 48);
  for (p += 64, n -= 64; n >= 64; p += 64, n -= 64) {
    x1 = fold(x1, k1k2, load(p));
    x2 = fold(x2, k1k2, load(p + 16));
    x3 = fold(x3, k1k2, load(p + 32));
    x4 = fold(x4, k1k2, load(p + 48));
  }
  x1 = fold(fold(fold(x1, k3k4, x2), k3k4, x3), k3k4, x4);
  for (; n >= 16; p += 16, n -= 16) x1 = fold(x1, k3k4, load(p));
  // 128 -> 64 bits, then 64 -> 32.
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), _mm_clmulepi64_si128(x1, k3k4, 0x10));
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 4),
                     _mm_clmulepi64_si128(_mm_and_si128(x1, low32), k5, 0x00));
  // Barrett reduction to the 32-bit remainder.
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), poly, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), poly, 0x00);
  return uint32_t(_mm_extract_epi32(_mm_xor_si128(x1, t), 1));
}

bool have_clmul() {
  static const bool yes = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return yes;
}

#endif

}  // namespace

uint32_t crc32(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
#ifdef TFM_CRC32_CLMUL
  if (n >= 64 && have_clmul()) {
    const size_t bulk = n & ~size_t{15};
    crc = crc_clmul(crc, p, bulk);
    p += bulk;
    n -= bulk;
  }
#endif
  return ~crc_tables(crc, p, n);
}

}  // namespace tfm::io
