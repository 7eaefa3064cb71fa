// CPU int8 GEMM of inference (gemm_int8.h): y = act(x W^T + bias) with W
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
// The tile broadcasts x, as the fp32 one does (gemm_rows.cc): W's rows are
// copied 16 at a time into a panel of four-byte groups (panel.h), and four
// bytes of a row of x at a time run against the 16 rows' four bytes at the
// same k, each column's sum in an int32 lane of its own: faster than a tile
// of dot products (eight horizontal sums a tile), most at a small K
// (tests/bench/NOTES.md has the rates).
//
// Where the CPU has AMX (Intel's tile unit: Sapphire Rapids and later, and
// a kernel that grants its state) and K is a multiple of 64, the AVX-512
// path hands the products to the tiles (block_amx): tdpbusd multiplies the
// same unsigned x + 64 by the same signed W into int32 with no int16 step,
// so the sums, and every bit after them, are the other paths'; at the
// decoder's shapes 4-9x the AVX-512BW tile's rate (tests/bench/NOTES.md).
// Without AMX, AVX-512 VNNI's vpdpbusd does a step's three instructions in
// one, again the same sums (tile_vnni).
//
// The float epilogue, y = float(sum) * (sx * sw) + b (then ReLU), is the
// same operations in the same order on both paths (the file is compiled
// with -ffp-contract=off), so the AVX2 and portable paths agree bit for bit.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>
#include <utility>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/panel.h"

namespace tfm::ops::cpu {
namespace {

constexpr int kTileRows = 4;      // x rows an AVX2 tile holds: 4 x 2 accumulators
constexpr int kTileRows512 = 12;  // an AVX-512 tile's: 12 x 2 of 32 registers
constexpr int64_t kAmxRows = 32, kAmxK = 64;  // AMX: rows of x a step, bytes of K a tile row (block_amx)

// The rows of x, quantized: the values, for AVX2 the values plus 64 (see
// above), and the scales. Each row padded with zeros to ld (x + 64 pads
// with 64, against W's zeros).
constexpr int kShiftBits = 6, kShift = 1 << kShiftBits;
static_assert(kInt8InputLimit + kShift <= 127, "x + 64 must fit vpmaddubsw's pairs into int16");
struct QuantizedRows {
  const int8_t* values = nullptr;    // (m, ld)
  const uint8_t* shifted = nullptr;  // (m, ld), on AMX (m rounded up to kAmxRows, ld)
  const float* scales = nullptr;     // (m)
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
      y[i * ldy + j] = e.apply(dot_portable(x.values + i * x.ld, w.values + j * w.ld, w.cols), i, j);
}

#if defined(__x86_64__)
// One panel's share of the epilogue: its 16 columns' 64 sums[j], scales and
// bias (zero past the matrix's last row), read by every tile.
struct PanelColumns {
  alignas(64) int32_t shift[kPanel];
  alignas(64) float scale[kPanel];
  alignas(64) float bias[kPanel];
};

// Rows [i, i + R) of x against a panel of W's rows [j0, j0 + cols): each
// step broadcasts four bytes of a row (x + 64, unsigned) against the panel's
// 16 rows' four bytes at the same k, vpmaddubsw into pairs, vpmaddwd by
// ones into one int32 a column: 2 R accumulators of column sums, no
// horizontal sum at the end (a tile of dot products needs eight, which at
// the demo model's K = 128 cost as much as its four steps over K).
template <int R>
[[gnu::target("avx2")]] void tile_avx2(const QuantizedRows& x, const int32_t* panel, const PanelColumns& pc,
                                       const Epilogue& e, float* y, int64_t ldy, int64_t i, int64_t j0,
                                       int64_t cols) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  const uint8_t* xr[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) xr[r] = x.shifted + (i + r) * x.ld;
  const int64_t groups = x.ld / 4;
  // Two groups a pass, as gemm_rows.cc's tile: 1.02-1.16x on Zen 3
  // (tests/bench/NOTES.md).
#pragma GCC unroll 2
  for (int64_t g = 0; g < groups; ++g) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + g * kPanel));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + g * kPanel + 8));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      int32_t four;
      std::memcpy(&four, xr[r] + 4 * g, sizeof four);
      const __m256i xb = _mm256_set1_epi32(four);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(xb, w0), ones));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(xb, w1), ones));
    }
  }
  // Out of the registers once (an epilogue indexing them would keep them in
  // memory through the loop), then apply(), eight columns at once: the same
  // operations in the same order.
  alignas(32) int32_t sums[R][kPanel];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums[r]), acc[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums[r] + 8), acc[r][1]);
  }
  for (int r = 0; r < R; ++r) {
    // Into y itself; the last panel's columns through `out`, then copied.
    alignas(32) float out[kPanel];
    float* const yr = y + (i + r) * ldy + j0;
    float* const to = cols == kPanel ? yr : out;
    const __m256 sx = _mm256_set1_ps(e.x_scales[i + r]);
    for (int h = 0; h < 2; ++h) {
      const __m256i sum = _mm256_sub_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(sums[r] + 8 * h)),
                                           _mm256_load_si256(reinterpret_cast<const __m256i*>(pc.shift + 8 * h)));
      const __m256 s = _mm256_mul_ps(sx, _mm256_load_ps(pc.scale + 8 * h));
      __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(sum), s);
      if (e.bias) v = _mm256_add_ps(v, _mm256_load_ps(pc.bias + 8 * h));
      if (e.relu) v = _mm256_max_ps(_mm256_setzero_ps(), v);  // v < 0 ? 0 : v, as std::max(v, 0)
      _mm256_storeu_ps(to + 8 * h, v);
    }
    if (cols < kPanel) std::copy(out, out + cols, yr);
  }
}

// W's rows [j0, j0 + cols) as panels: the ones packed at load
// (Int8Matrix::panels), or copied into `room` now.
const int32_t* w_panels(const Int8Matrix& w, int64_t j0, int64_t cols, int32_t* room) {
  const int64_t groups = w.ld / 4;
  if (w.panels) return w.panels + j0 * groups;
  pack_panels(reinterpret_cast<const int32_t*>(w.values + j0 * w.ld), cols, groups, groups, room);
  return room;
}

template <int R>
[[gnu::target("avx2")]] void tail_avx2(const QuantizedRows& x, const int32_t* panel, const PanelColumns& pc,
                                       const Epilogue& e, float* y, int64_t ldy, int64_t i, int64_t m,
                                       int64_t j0, int64_t cols) {
  if constexpr (R > 0) {
    if (m - i == R) return tile_avx2<R>(x, panel, pc, e, y, ldy, i, j0, cols);
    tail_avx2<R - 1>(x, panel, pc, e, y, ldy, i, m, j0, cols);
  }
}

// Every row of x against W's rows [j0, j0 + cols) as a panel (ld / 4
// groups x 16 rows of four bytes, ld / 4 a multiple of 8): W's own
// (Int8Matrix::panels) or packed into `room`.
[[gnu::target("avx2")]] void panel_avx2(const QuantizedRows& x, const Int8Matrix& w, const Epilogue& e,
                                        float* y, int64_t ldy, int64_t m, int64_t j0, int64_t cols,
                                        int32_t* room) {
  const int32_t* panel = w_panels(w, j0, cols, room);
  PanelColumns pc{};
  for (int64_t q = 0; q < cols; ++q) {
    pc.shift[q] = kShift * w.sums[j0 + q];
    pc.scale[q] = e.w_scales[j0 + q];
    pc.bias[q] = e.bias ? e.bias[j0 + q] : 0.0f;
  }
  // The next block's panel, when W comes packed (panel after panel in
  // memory), asked for a share of its lines after each tile, as gemm_rows.cc
  // asks for its next block: a base decoder step's int8 GEMMs 1.02-1.04x on
  // Zen 3 (tests/bench/NOTES.md). Into L1: the panel is K x 16 bytes.
  const char* next =
      w.panels && j0 + kPanel < w.rows ? reinterpret_cast<const char*>(panel + w.ld / 4 * kPanel) : nullptr;
  const int64_t lines = next ? w.ld / 4 : 0, tiles = std::max<int64_t>(1, m / kTileRows);
  const int64_t share = (lines + tiles - 1) / tiles;
  int64_t asked = 0;
  int64_t i = 0;
  for (; i + kTileRows <= m; i += kTileRows) {
    tile_avx2<kTileRows>(x, panel, pc, e, y, ldy, i, j0, cols);
    for (const int64_t upto = std::min(lines, asked + share); asked < upto; ++asked)
      _mm_prefetch(next + 64 * asked, _MM_HINT_T0);
  }
  tail_avx2<kTileRows - 1>(x, panel, pc, e, y, ldy, i, m, j0, cols);
  for (; asked < lines; ++asked) _mm_prefetch(next + 64 * asked, _MM_HINT_T0);
}

// Rows [i, i + rows) of y from their sums: row r's panel h at
// sums + r * stride + h * 16. tile_avx2's epilogue, sixteen columns at once:
// the same operations in the same order.
[[gnu::target("avx512f,avx512bw"), gnu::always_inline]] inline void epilogue_avx512(
    const int32_t* sums, int64_t stride, int64_t rows, int64_t panels, const PanelColumns* pc, const Epilogue& e,
    float* y, int64_t ldy, int64_t i, int64_t j0, int64_t cols) {
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t r = 0; r < rows; ++r) {
    const __m512 sx = _mm512_set1_ps(e.x_scales[i + r]);
    for (int64_t h = 0; h < panels; ++h) {
      const __m512i sum = _mm512_sub_epi32(_mm512_loadu_si512(sums + r * stride + h * kPanel),
                                           _mm512_load_si512(pc[h].shift));
      const __m512 s = _mm512_mul_ps(sx, _mm512_load_ps(pc[h].scale));
      // (The masked forms of cvt and max: GCC 12's plain ones take an
      // undefined source that -Wmaybe-uninitialized flags.)
      __m512 v = _mm512_mul_ps(_mm512_mask_cvtepi32_ps(zero, 0xFFFF, sum), s);
      if (e.bias) v = _mm512_add_ps(v, _mm512_load_ps(pc[h].bias));
      // max(0, v) as tile_avx2's
      if (e.relu) v = _mm512_mask_max_ps(zero, 0xFFFF, zero, v);
      float* out = y + (i + r) * ldy + j0 + h * kPanel;
      const int64_t n = std::min(kPanel, cols - h * kPanel);
      if (n == kPanel)
        _mm512_storeu_ps(out, v);
      else
        _mm512_mask_storeu_ps(out, static_cast<__mmask16>((1u << n) - 1), v);
    }
  }
}

// A tile's sums out of the registers once, then epilogue_avx512.
template <int R, int P>
[[gnu::target("avx512f,avx512bw"), gnu::always_inline]] inline void finish_tile(
    const __m512i (&acc)[R][P], const PanelColumns* pc, const Epilogue& e, float* y, int64_t ldy, int64_t i,
    int64_t j0, int64_t cols) {
  alignas(64) int32_t sums[R][P][kPanel];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < P; ++h) _mm512_store_si512(sums[r][h], acc[r][h]);
  epilogue_avx512(sums[0][0], P * kPanel, R, P, pc, e, y, ldy, i, j0, cols);
}

// tile_avx2 on AVX-512BW: a step broadcasts four bytes of a row against the
// whole panel's four bytes at k (one 64-byte load) and takes the column
// sums in one register: 3 instructions for the 64 products that AVX2 does
// in 6, over P panels side by side (the next at panel + ld / 4 * 16), so
// that a broadcast serves 2 P of them. The epilogue is tile_avx2's, sixteen
// columns at once: the same operations in the same order.
template <int R, int P>
[[gnu::target("avx512f,avx512bw")]] void tile_avx512(const QuantizedRows& x, const int32_t* panel,
                                                     const PanelColumns* pc, const Epilogue& e, float* y,
                                                     int64_t ldy, int64_t i, int64_t j0, int64_t cols) {
  const __m512i ones = _mm512_set1_epi16(1);
  __m512i acc[R][P];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < P; ++h) acc[r][h] = _mm512_setzero_si512();
  const uint8_t* xr = x.shifted + i * x.ld;
  const int64_t groups = x.ld / 4, panel_size = groups * kPanel;
  for (int64_t g = 0; g < groups; ++g) {
    __m512i w[P];
    for (int h = 0; h < P; ++h) w[h] = _mm512_loadu_si512(panel + h * panel_size + g * kPanel);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      int32_t four;
      std::memcpy(&four, xr + r * x.ld + 4 * g, sizeof four);
      const __m512i xb = _mm512_set1_epi32(four);
      for (int h = 0; h < P; ++h)
        acc[r][h] = _mm512_add_epi32(acc[r][h], _mm512_madd_epi16(_mm512_maddubs_epi16(xb, w[h]), ones));
    }
  }
  finish_tile<R, P>(acc, pc, e, y, ldy, i, j0, cols);
}

// tile_avx512 with AVX-512 VNNI: vpdpbusd multiplies the four unsigned
// bytes of x + 64 by the panel's signed bytes and adds the four products
// into each int32 lane, one instruction for tile_avx512's three. Its sums
// have no int16 step, but tile_avx512's pairs never saturate (the header's
// bound), so the sums are the same integers and the epilogue the same.
template <int R, int P>
[[gnu::target("avx512f,avx512bw,avx512vnni")]] void tile_vnni(const QuantizedRows& x, const int32_t* panel,
                                                              const PanelColumns* pc, const Epilogue& e, float* y,
                                                              int64_t ldy, int64_t i, int64_t j0, int64_t cols) {
  __m512i acc[R][P];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < P; ++h) acc[r][h] = _mm512_setzero_si512();
  const uint8_t* xr = x.shifted + i * x.ld;
  const int64_t groups = x.ld / 4, panel_size = groups * kPanel;
  for (int64_t g = 0; g < groups; ++g) {
    __m512i w[P];
    for (int h = 0; h < P; ++h) w[h] = _mm512_loadu_si512(panel + h * panel_size + g * kPanel);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      int32_t four;
      std::memcpy(&four, xr + r * x.ld + 4 * g, sizeof four);
      const __m512i xb = _mm512_set1_epi32(four);
      for (int h = 0; h < P; ++h) acc[r][h] = _mm512_dpbusd_epi32(acc[r][h], xb, w[h]);
    }
  }
  finish_tile<R, P>(acc, pc, e, y, ldy, i, j0, cols);
}

// The tiles of 1 to 12 rows over P panels, by their row count: a block's
// whole tiles and its last, shorter one.
using Int8Tile = void (*)(const QuantizedRows&, const int32_t*, const PanelColumns*, const Epilogue&, float*,
                          int64_t, int64_t, int64_t, int64_t);
template <int P, int... R>
constexpr std::array<Int8Tile, kTileRows512 + 1> avx512_tiles(std::integer_sequence<int, R...>) {
  return {nullptr, &tile_avx512<R + 1, P>...};
}
template <int P, int... R>
constexpr std::array<Int8Tile, kTileRows512 + 1> vnni_tiles(std::integer_sequence<int, R...>) {
  return {nullptr, &tile_vnni<R + 1, P>...};
}

// The epilogue's share of W's rows [j0, j0 + cols), cols <= 32, a panel
// of 16 at a time.
void panel_columns(const Int8Matrix& w, const Epilogue& e, int64_t j0, int64_t cols, PanelColumns* pc) {
  for (int64_t h = 0; h * kPanel < cols; ++h) {
    const int64_t first = j0 + h * kPanel, n = std::min(kPanel, cols - h * kPanel);
    for (int64_t q = 0; q < n; ++q) {
      pc[h].shift[q] = kShift * w.sums[first + q];
      pc[h].scale[q] = e.w_scales[first + q];
      pc[h].bias[q] = e.bias ? e.bias[first + q] : 0.0f;
    }
  }
}

// Every row of x against W's rows [j0, j0 + cols), cols <= 32, as two
// panels when cols > 16, else one: W's own, or packed into `room` (room
// for both).
[[gnu::target("avx512f,avx512bw")]] void block_avx512(const QuantizedRows& x, const Int8Matrix& w,
                                                      const Epilogue& e, float* y, int64_t ldy, int64_t m,
                                                      int64_t j0, int64_t cols, int32_t* room, bool vnni) {
  const int32_t* panel = w_panels(w, j0, cols, room);
  PanelColumns pc[2] = {};
  panel_columns(w, e, j0, cols, pc);
  constexpr auto rows = std::make_integer_sequence<int, kTileRows512>{};
  static constexpr std::array<Int8Tile, kTileRows512 + 1> bw1 = avx512_tiles<1>(rows), bw2 = avx512_tiles<2>(rows),
                                                           vnni1 = vnni_tiles<1>(rows), vnni2 = vnni_tiles<2>(rows);
  const bool two = cols > kPanel;
  const std::array<Int8Tile, kTileRows512 + 1>& tiles = vnni ? (two ? vnni2 : vnni1) : (two ? bw2 : bw1);
  int64_t i = 0;
  for (; i + kTileRows512 <= m; i += kTileRows512) tiles[kTileRows512](x, panel, pc, e, y, ldy, i, j0, cols);
  if (i < m) tiles[static_cast<size_t>(m - i)](x, panel, pc, e, y, ldy, i, j0, cols);
}

// AMX (Intel's tile unit, Sapphire Rapids and later): the same sums by
// tiles of 16 x 16 int32. A tile of x is 16 rows of 64 bytes of K (x + 64);
// a panel's 16 groups of four bytes from group g are already the other
// operand's layout (a tile row: the 16 columns' four bytes); one tdpbusd
// adds the 16 x 16 x 64 products of unsigned by signed bytes into int32,
// exactly (no int16 pairs to saturate), so the sums are every other
// path's, and so the bits. Two groups of 16 rows x two panels a step: sums
// in tiles 0-3, x in 4-5, W in 6-7. x's rows are padded to whole groups of
// 32 (QuantizedRows::shifted); the padding's sums are never stored.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// The calling thread's tiles, as block_amx uses them (the configuration is
// a thread's state), and their release.
[[gnu::target("amx-tile")]] void amx_configure() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
  }
  // GCC 12 does not count ldtilecfg as reading its operand, and drops the
  // stores above without this.
  asm volatile("" : : "r"(&c) : "memory");
  _tile_loadconfig(&c);
}
[[gnu::target("amx-tile")]] void amx_release() { _tile_release(); }

[[gnu::target("amx-tile,amx-int8,avx512f,avx512bw")]] void block_amx(const QuantizedRows& x, const Int8Matrix& w,
                                                                     const Epilogue& e, float* y, int64_t ldy,
                                                                     int64_t m, int64_t j0, int64_t cols,
                                                                     int32_t* room) {
  const int32_t* panel = w_panels(w, j0, cols, room);
  PanelColumns pc[2] = {};
  panel_columns(w, e, j0, cols, pc);
  const bool two = cols > kPanel;
  const int64_t ld = x.ld, panel_size = ld / 4 * kPanel;
  const uint8_t* xs = x.shifted;
  alignas(64) int32_t sums[kAmxRows][2][kPanel];
  for (int64_t i = 0; i < m; i += kAmxRows) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t c = 0; c < ld; c += kAmxK) {
      const int32_t* wc = panel + c / 4 * kPanel;
      _tile_loadd(4, xs + i * ld + c, ld);
      _tile_loadd(5, xs + (i + 16) * ld + c, ld);
      _tile_loadd(6, wc, 64);
      _tile_dpbusd(0, 4, 6);
      _tile_dpbusd(2, 5, 6);
      if (two) {
        _tile_loadd(7, wc + panel_size, 64);
        _tile_dpbusd(1, 4, 7);
        _tile_dpbusd(3, 5, 7);
      }
    }
    _tile_stored(0, sums[0][0], sizeof sums[0]);
    _tile_stored(2, sums[16][0], sizeof sums[0]);
    if (two) {
      _tile_stored(1, sums[0][1], sizeof sums[0]);
      _tile_stored(3, sums[16][1], sizeof sums[0]);
    }
    epilogue_avx512(sums[0][0], 2 * kPanel, std::min(kAmxRows, m - i), two ? 2 : 1, pc, e, y, ldy, i, j0, cols);
  }
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
  static const bool has_avx2 = __builtin_cpu_supports("avx2");
  simd = simd && has_avx2;
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

void pack_int8_panels(const int8_t* values, int64_t rows, int64_t ld, int32_t* panels) {
  pack_panels(reinterpret_cast<const int32_t*>(values), rows, ld / 4, ld / 4, panels);
}

bool gemm_int8_vnni() {
  static const bool yes = [] {
#if defined(__x86_64__)
    const char* env = std::getenv("TFM_INT8_VNNI");
    if (env && std::string_view(env) == "0") return false;
    return gemm_int8_path() == RowGemmPath::avx512 && __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
  }();
  return yes;
}

bool gemm_int8_amx() {
  static const bool yes = [] {
#if defined(__x86_64__)
    const char* env = std::getenv("TFM_INT8_AMX");
    if (env && std::string_view(env) == "0") return false;
    unsigned a = 0, b = 0, c = 0, d = 0;
    // CPUID leaf 7: EDX bit 24 AMX-TILE, 25 AMX-INT8; then the kernel's
    // leave to use the tiles' 8 KiB of state (ARCH_REQ_XCOMP_PERM for
    // XFEATURE_XTILEDATA, 18), refused by kernels before 5.16.
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25))) return false;
    constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
    return gemm_int8_path() == RowGemmPath::avx512 && syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
#else
    return false;
#endif
  }();
  return yes;
}

RowGemmPath gemm_int8_path() {
  static const RowGemmPath path = [] {
#if defined(__x86_64__)
    // At most the float GEMM's (TFM_ROW_GEMM caps both); AVX-512 also needs BW.
    const RowGemmPath cap = gemm_row_invariant_path();
    if (cap == RowGemmPath::avx512 && __builtin_cpu_supports("avx512bw")) return RowGemmPath::avx512;
    if (cap != RowGemmPath::portable && __builtin_cpu_supports("avx2")) return RowGemmPath::avx2;
#endif
    return RowGemmPath::portable;
  }();
  return path;
}

void gemm_int8(const float* x, int64_t m, int64_t ldx, const Int8Matrix& w, float* y, int64_t ldy,
               const float* bias, bool relu, RowGemmPath path, Int8Products products) {
  const RowGemmPath have = gemm_int8_path();
  if (path == RowGemmPath::best || static_cast<int>(path) > static_cast<int>(have)) path = have;
  const bool simd = path != RowGemmPath::portable;
  const bool wide = path == RowGemmPath::avx512;
  const bool amx = wide && products == Int8Products::best && w.ld % kAmxK == 0 && gemm_int8_amx();
  const bool vnni = wide && products != Int8Products::bw && gemm_int8_vnni();
  // The calling thread's buffers, taken before the parallel region (inside
  // it, a thread_local names each worker's own).
  const int64_t padded = amx ? (m + kAmxRows - 1) / kAmxRows * kAmxRows : m;
  int8_t* const values = scratch<int8_t, ScratchUse::int8_values>(m * w.ld);
  uint8_t* const shifted = simd ? scratch<uint8_t, ScratchUse::int8_shifted>(padded * w.ld) : nullptr;
  float* const scales = scratch<float, ScratchUse::int8_scales>(m);
  for (int64_t i = 0; i < m; ++i) {
    int8_t* row = values + i * w.ld;
    scales[i] = quantize_row_int8(x + i * ldx, w.cols, row, w.ld, simd, kInt8InputLimit);
#if defined(__x86_64__)
    if (simd) shifted_avx2(row, w.ld, shifted + i * w.ld);
#endif
  }
  // AMX's padding rows: computed, never stored; set, so that no product
  // reads memory never written.
  if (simd && padded > m) std::memset(shifted + m * w.ld, kShift, static_cast<size_t>((padded - m) * w.ld));
  const QuantizedRows q{values, shifted, scales, w.ld};
  const Epilogue e{scales, w.scales, bias, relu};
  // As gemm_rows.cc: threads take blocks of W's rows, a panel (two on
  // AVX-512), and run every row of x against them.
  const int64_t block = (path == RowGemmPath::avx512 ? 2 : 1) * kPanel;
  const int64_t blocks = (w.rows + block - 1) / block;
  const bool parallel = m * w.rows * w.cols > (int64_t{1} << 19);
#pragma omp parallel if (parallel)
  {
    // The thread's own panels (none needed when W comes packed).
    int32_t* const panel =
        simd && !w.panels ? scratch<int32_t, ScratchUse::int8_panels>(block / kPanel * w.ld / 4 * kPanel) : nullptr;
#if defined(__x86_64__)
    if (amx) amx_configure();
#endif
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t j0 = blk * block, j1 = std::min(w.rows, j0 + block);
#if defined(__x86_64__)
      if (amx) {
        block_amx(q, w, e, y, ldy, m, j0, j1 - j0, panel);
        continue;
      }
      if (path == RowGemmPath::avx512) {
        block_avx512(q, w, e, y, ldy, m, j0, j1 - j0, panel, vnni);
        continue;
      }
      if (simd) {
        panel_avx2(q, w, e, y, ldy, m, j0, j1 - j0, panel);
        continue;
      }
#endif
      block_portable(q, w, y, ldy, e, m, j0, j1);
    }
#if defined(__x86_64__)
    if (amx) amx_release();
#endif
  }
}

}  // namespace tfm::ops::cpu
