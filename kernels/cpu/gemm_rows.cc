// CPU GEMM whose rows do not see each other (GemmOptions::row_invariant):
// C = act(alpha * A B^T + beta * C + bias) with every element summed in one
// fixed order, so a row of C has the same bits whatever the other rows are,
// how many there are, where it sits among them and how many threads run.
// The decoder needs that for batch invariance, and OpenBLAS does not give
// it: its kernels sum an element differently by its column's place in a
// register block (OpenBLAS 0.3.21's Zen / Haswell sgemm: a period of
// rows, half of them one way, and other sums in the tails).
//
// The order of element (i, j): the products a[i, k] b[j, k] fused onto one
// accumulator by multiply-adds, k = 0, 1, ..., K - 1 in turn, from zero;
// then alpha, beta C and the bias (and ReLU). That is the order of a
// register-tiled kernel that broadcasts A: a tile of 6 rows x 16 columns
// holds 12 AVX2 accumulators (12 rows, 12 AVX-512 ones where the CPU has
// AVX-512), each step one broadcast of a[i, k] per row against 16 values of
// B's column k, every element a chain of its own. The portable path runs
// the same chains with std::fma: the same bits on every x86-64 (and any
// other CPU), whichever path runs.
//
// B (a weight matrix (N, K), rows as they lie) is copied 16 rows at a time
// into a panel (K, 16), B's column k of those rows contiguous, which every
// row of A then runs against while it stays in cache. The copy moves each
// weight once a call, against M multiply-adds; at the decoder's 128 rows it
// took 4-10% of the kernel's time (tests/bench/NOTES.md), since the copy is
// where the weights arrive from memory.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu/gemm_rows.h"
#include "kernels/cpu/panel.h"

namespace tfm::ops::cpu {
namespace {

constexpr int kTileRows = 6;    // A rows an AVX2 tile holds: 6 x 2 accumulators, 15 of 16 registers
constexpr int kTileRows512 = 12;  // an AVX-512 tile's: 12 accumulators of 32 registers (a step
                                  // loads 13: the panel's row and 12 broadcasts, 2 a cycle)

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

// Rows [0, m) of C's columns [j0, j0 + cols) from their panel, chain by chain.
template <typename T>
void panel_portable(const GemmShape& s, const T* a, const T* panel, T* c, const Epilogue<T>& e,
                    int64_t j0, int64_t cols) {
  for (int64_t i = 0; i < s.m; ++i) {
    const T* ar = a + i * s.lda;
    T acc[kPanel] = {};
    for (int64_t p = 0; p < s.k; ++p)
      for (int64_t q = 0; q < kPanel; ++q) acc[q] = std::fma(ar[p], panel[p * kPanel + q], acc[q]);
    T* cr = c + i * s.ldc + j0;
    for (int64_t q = 0; q < cols; ++q) cr[q] = e.apply(acc[q], cr + q, j0 + q);
  }
}

// A's rows packed for tile_avx512: the tile of rows [t * 12, t * 12 + 12)
// at out + t * K * 12, its element (r, p) at [p * 12 + r], rows past m
// zero. A step of a tile then broadcasts 12 consecutive floats, one stream,
// instead of reading 12 rows lda apart (12 streams through L1 beside the
// panel, which alone fills it at K = 512). One tile a call, written in
// order: twelve rows read side by side, the stores consecutive.
void pack_tile12(const float* a, int64_t lda, int64_t m, int64_t k, int64_t t, float* out) {
  constexpr int64_t R = kTileRows512;
  float* tile = out + t * k * R;
  const int64_t rows = std::min(R, m - t * R);
  const float* row0 = a + t * R * lda;
  if (rows == R) {
    for (int64_t p = 0; p < k; ++p)
#pragma GCC unroll 12
      for (int64_t r = 0; r < R; ++r) tile[p * R + r] = row0[r * lda + p];
    return;
  }
  for (int64_t p = 0; p < k; ++p)
    for (int64_t r = 0; r < R; ++r) tile[p * R + r] = r < rows ? row0[r * lda + p] : 0.0f;
}

#if defined(__x86_64__)
// The next block's weights (B's rows, or packed panels as one row), asked
// into the L2 cache while this block's tiles run, so that they do not wait
// on memory: a large model's weights come from DRAM once a step. Each tile
// has a quota of lines to ask for. The AVX-512 tile spreads its quota over
// its K steps, a few lines every kAheadSteps (where kAsking* allow): the
// 90-odd lines of a burst after each tile filled the core's line-fill
// buffers and stalled it until they drained (tests/bench/NOTES.md). The
// AVX2 tile's, a quarter as many (its blocks are half as wide, its tiles
// half as tall), are asked for after it (panel_simd): spread through its
// loop they cost it 5% in cache.
struct Ahead {
  const char* row = nullptr;  // the row being asked for
  int64_t at = 0;             // its next line's offset
  int64_t row_bytes = 0, ld_bytes = 0;
  int64_t left = 0;   // lines still to ask for
  int64_t quota = 0;  // of them, the running tile's

  Ahead() = default;
  Ahead(const float* next, int64_t rows, int64_t row_floats, int64_t ld)
      : row(reinterpret_cast<const char*>(next)), row_bytes(4 * row_floats), ld_bytes(4 * ld),
        left(rows * ((row_floats + 15) / 16)) {}
  void line() {
    _mm_prefetch(row + at, _MM_HINT_T1);
    if ((at += 64) >= row_bytes) at = 0, row += ld_bytes;
    --left;
  }
  // After `steps` more of a tile's k steps: the quota's lines due by then
  // (quota * steps / k, `owed` carrying the remainder), so that the tile has
  // asked for exactly its quota when it ends. Called every kAheadSteps
  // steps, not every step: the bookkeeping's integer operations take issue
  // slots from the multiply-adds.
  void after(int64_t steps, int64_t& owed, int64_t k) {
    for (owed += quota * steps; owed >= k; owed -= k) line();
  }
};
constexpr int64_t kAheadSteps = 64;
// Where the AVX-512 tile asks through its loop: K from kAskingK and B from
// kAskingBytes. Below, a block's lines are few or the weights sit in cache
// (a small model's), and the loop in pieces cost the demo model's shapes
// (K = 128) 3% in cache.
constexpr int64_t kAskingK = 256, kAskingBytes = int64_t{1} << 20;

// Rows [i, i + R) x the panel's columns: 2 R accumulators, one chain each.
template <int R>
[[gnu::target("avx2,fma")]] void tile_avx2(const GemmShape& s, const float* a, const float* panel, float* c,
                                            const Epilogue<float>& e, int64_t i, int64_t j0, int64_t cols) {
  __m256 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const float* ar[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) ar[r] = a + (i + r) * s.lda;
  const int64_t k = s.k;
  // Two steps a pass, so that the loop's own count, compare and pointer
  // steps come every other step: on AMD's Zen 3 the decoder's shapes ran
  // 1.00-1.08x faster (tests/bench/NOTES.md). The same chains, in order.
#pragma GCC unroll 2
  for (int64_t p = 0; p < k; ++p) {
    // (Unaligned loads: packed_b's panels need not be aligned; ours are, to 64 bytes.)
    const __m256 w0 = _mm256_loadu_ps(panel + p * kPanel), w1 = _mm256_loadu_ps(panel + p * kPanel + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_broadcast_ss(ar[r] + p);
      acc[r][0] = _mm256_fmadd_ps(x, w0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, w1, acc[r][1]);
    }
  }
  // Out of the registers once (an epilogue indexing them would keep them in
  // memory through the loop), then the epilogue as apply() does it, eight
  // columns at once.
  alignas(32) float dot[R][kPanel];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm256_store_ps(dot[r], acc[r][0]);
    _mm256_store_ps(dot[r] + 8, acc[r][1]);
  }
  const __m256 alpha = _mm256_set1_ps(e.alpha), beta = _mm256_set1_ps(e.beta);
  for (int r = 0; r < R; ++r) {
    float* cr = c + (i + r) * s.ldc + j0;
    if (cols < kPanel) {  // the last panel's columns: one at a time
      for (int64_t q = 0; q < cols; ++q) cr[q] = e.apply(dot[r][q], cr + q, j0 + q);
      continue;
    }
    for (int h = 0; h < 2; ++h) {
      __m256 v = _mm256_load_ps(dot[r] + 8 * h);
      if (e.alpha != 1.0f) v = _mm256_mul_ps(alpha, v);
      if (e.beta != 0.0f) v = _mm256_add_ps(v, _mm256_mul_ps(beta, _mm256_loadu_ps(cr + 8 * h)));
      if (e.bias) v = _mm256_add_ps(v, _mm256_loadu_ps(e.bias + j0 + 8 * h));
      if (e.relu) v = _mm256_max_ps(_mm256_setzero_ps(), v);  // v < 0 ? 0 : v, as std::max(v, 0)
      _mm256_storeu_ps(cr + 8 * h, v);
    }
  }
}

template <int R>
[[gnu::target("avx2,fma")]] void tail_avx2(const GemmShape& s, const float* a, const float* panel, float* c,
                                            const Epilogue<float>& e, int64_t i, int64_t j0, int64_t cols) {
  if constexpr (R > 0) {
    if (s.m - i == R) return tile_avx2<R>(s, a, panel, c, e, i, j0, cols);
    tail_avx2<R - 1>(s, a, panel, c, e, i, j0, cols);
  }
}

// Step p of tile_avx512: the panels' row p against the tile's twelve
// broadcasts.
template <int R, int P>
[[gnu::target("avx512f,avx2,fma"), gnu::always_inline]] inline void step_avx512(__m512 (&acc)[R][P],
                                                                              const float* panel, const float* at,
                                                                              int64_t k, int64_t p) {
  __m512 w[P];
  for (int h = 0; h < P; ++h) w[h] = _mm512_loadu_ps(panel + h * k * kPanel + p * kPanel);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const __m512 x = _mm512_set1_ps(at[p * kTileRows512 + r]);
    for (int h = 0; h < P; ++h) acc[r][h] = _mm512_fmadd_ps(x, w[h], acc[r][h]);
  }
}

// tile_avx2's chains on sixteen-float registers: a row's 16 columns of a
// panel in one accumulator, over P panels side by side (the next panel at
// panel + K * 16), its a[i, k] broadcast once against all of them. `a` is A
// packed by pack_tile12 (i a multiple of 12). With two panels a step is 2
// panel loads and 12 broadcasts for 24 multiply-adds, so the FMA ports bind
// rather than the loads (one panel: 13 loads for 12).
template <int R, int P, bool kAsks>
[[gnu::target("avx512f,avx2,fma")]] void tile_avx512(const GemmShape& s, const float* a, const float* panel,
                                                      float* c, const Epilogue<float>& e, int64_t i, int64_t j0,
                                                      int64_t cols, Ahead& ahead) {
  __m512 acc[R][P];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < P; ++h) acc[r][h] = _mm512_setzero_ps();
  const int64_t k = s.k;
  const float* at = a + i * k;  // tile i / 12, of 12 x k floats
  if constexpr (kAsks) {  // the quota through the loop, then none left for panel_simd
    Ahead next = ahead;    // in registers through the loop
    int64_t owed = 0;
    for (int64_t p0 = 0; p0 < k; p0 += kAheadSteps) {
      const int64_t p1 = std::min(k, p0 + kAheadSteps);
      for (int64_t p = p0; p < p1; ++p) step_avx512<R, P>(acc, panel, at, k, p);
      next.after(p1 - p0, owed, k);
    }
    next.quota = 0;
    ahead = next;
  } else {
    for (int64_t p = 0; p < k; ++p) step_avx512<R, P>(acc, panel, at, k, p);
  }
  alignas(64) float dot[R][P][kPanel];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < P; ++h) _mm512_store_ps(dot[r][h], acc[r][h]);
  const __m512 alpha = _mm512_set1_ps(e.alpha), beta = _mm512_set1_ps(e.beta);
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < P; ++h) {
      const int64_t jh = j0 + h * kPanel, ch = std::min(kPanel, cols - h * kPanel);
      float* cr = c + (i + r) * s.ldc + jh;
      if (ch < kPanel) {  // the last panel's columns: one at a time
        for (int64_t q = 0; q < ch; ++q) cr[q] = e.apply(dot[r][h][q], cr + q, jh + q);
        continue;
      }
      // As tile_avx2's epilogue: a product, then a sum, never fused.
      __m512 v = _mm512_load_ps(dot[r][h]);
      if (e.alpha != 1.0f) v = _mm512_mul_ps(alpha, v);
      if (e.beta != 0.0f) v = _mm512_add_ps(v, _mm512_mul_ps(beta, _mm512_loadu_ps(cr)));
      if (e.bias) v = _mm512_add_ps(v, _mm512_loadu_ps(e.bias + jh));
      // max(0, v) as tile_avx2's: GCC 12's _mm512_max_ps takes an undefined
      // source that -Wmaybe-uninitialized flags; the masked form has none.
      const __m512 zero = _mm512_setzero_ps();
      if (e.relu) v = _mm512_mask_max_ps(zero, 0xFFFF, zero, v);
      _mm512_storeu_ps(cr, v);
    }
}

template <int R, int P, bool kAsks>
[[gnu::target("avx512f,avx2,fma")]] void tail_avx512(const GemmShape& s, const float* a, const float* panel,
                                                      float* c, const Epilogue<float>& e, int64_t i, int64_t j0,
                                                      int64_t cols, Ahead& ahead) {
  if constexpr (R > 0) {
    if (s.m - i == R) return tile_avx512<R, P, kAsks>(s, a, panel, c, e, i, j0, cols, ahead);
    tail_avx512<R - 1, P, kAsks>(s, a, panel, c, e, i, j0, cols, ahead);
  }
}

// Every row of A against a block of panels, by tiles of kRows rows (`tile`,
// then `tail` for the last rows), with each tile's share of the next
// block's lines (Ahead): whatever of it the tile has not asked for through
// its loop is asked for here, after it.
template <int kRows, typename Tile, typename Tail>
void panel_simd(const GemmShape& s, const float* a, const float* panel, float* c, const Epilogue<float>& e,
                int64_t j0, int64_t cols, Ahead& ahead, Tile tile, Tail tail) {
  const int64_t lines = ahead.left;
  const int64_t tiles = std::max<int64_t>(1, (s.m + kRows - 1) / kRows);
  int64_t count = 0, given = 0;
  const auto run = [&](auto f, int64_t i) {
    const int64_t upto = lines * ++count / tiles;
    ahead.quota = upto - given;
    given = upto;
    if constexpr (std::is_invocable_v<decltype(f), const GemmShape&, const float*, const float*, float*,
                                      const Epilogue<float>&, int64_t, int64_t, int64_t, Ahead&>)
      f(s, a, panel, c, e, i, j0, cols, ahead);
    else
      f(s, a, panel, c, e, i, j0, cols);
    for (; ahead.quota > 0; --ahead.quota) ahead.line();
  };
  int64_t i = 0;
  for (; i + kRows <= s.m; i += kRows) run(tile, i);
  if (i < s.m) run(tail, i);
  while (ahead.left > 0) ahead.line();
}

bool has_avx512f() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

bool has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
#endif

}  // namespace

// The widest path the CPU has, at most what TFM_ROW_GEMM names (avx2,
// portable: an A/B switch; every path gives the same bits).
RowGemmPath gemm_row_invariant_path() {
  static const RowGemmPath path = [] {
    RowGemmPath widest = RowGemmPath::portable;
#if defined(__x86_64__)
    if (has_avx2_fma()) widest = has_avx512f() ? RowGemmPath::avx512 : RowGemmPath::avx2;
#endif
    const char* cap = std::getenv("TFM_ROW_GEMM");
    const std::string_view want = cap ? cap : "";
    if (want == "portable") return RowGemmPath::portable;
    if (want == "avx2" && widest == RowGemmPath::avx512) return RowGemmPath::avx2;
    return widest;
  }();
  return path;
}

const char* row_gemm_path_name(RowGemmPath path) {
  switch (path) {
    case RowGemmPath::avx512: return "AVX-512";
    case RowGemmPath::avx2: return "AVX2";
    case RowGemmPath::portable: return "portable";
    case RowGemmPath::best: return row_gemm_path_name(gemm_row_invariant_path());
  }
  return "portable";
}

template <typename T>
void gemm_row_invariant(const GemmShape& s, const T* a, const T* b, T* c, const T* bias,
                        const GemmOptions& o, RowGemmPath path) {
  const Epilogue<T> e{static_cast<T>(o.alpha), static_cast<T>(o.beta), bias, o.relu};
  const RowGemmPath have = gemm_row_invariant_path();
  if (!std::is_same_v<T, float>) path = RowGemmPath::portable;
  else if (path == RowGemmPath::best || static_cast<int>(path) > static_cast<int>(have)) path = have;
  // Threads take blocks of B's rows (C's columns), one panel or two (the
  // AVX-512 tile's), and run every row of A against them: the block stays in
  // cache while A streams.
  const int64_t width = path == RowGemmPath::avx512 ? 2 : 1, block_cols = width * kPanel;
  const int64_t blocks = (s.n + block_cols - 1) / block_cols;
  const bool parallel = s.m * s.n * s.k > (int64_t{1} << 18);
  const int threads = parallel ? omp_get_max_threads() : 1;
  const int64_t panel_size = s.k * kPanel, stride = width * panel_size;  // multiples of 64 bytes
  T* const panels_of = scratch<T, ScratchUse::row_panels>(stride * threads);
  const int64_t a_tile_count = (s.m + kTileRows512 - 1) / kTileRows512;
  // Whether the AVX-512 tile asks for the next block's lines through its
  // loop (Ahead): a large model's weights, which come from memory.
  const bool asks = s.k >= kAskingK && s.n * s.k * static_cast<int64_t>(sizeof(T)) >= kAskingBytes;
  float* a_tiles = nullptr;  // A packed by pack_tile12, for the AVX-512 path
  if constexpr (std::is_same_v<T, float>)
    if (path == RowGemmPath::avx512) a_tiles = scratch<float, ScratchUse::row_tiles_of_a>(a_tile_count * kTileRows512 * s.k);
#pragma omp parallel num_threads(threads) if (parallel)
  {
    T* const panel = panels_of + stride * omp_get_thread_num();
    if constexpr (std::is_same_v<T, float>)
      if (a_tiles) {  // the threads pack A's tiles between them, then each runs its blocks against all
#pragma omp for schedule(static)
        for (int64_t t = 0; t < a_tile_count; ++t) pack_tile12(a, s.lda, s.m, s.k, t, a_tiles);
      }
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t j0 = blk * block_cols, cols = std::min(block_cols, s.n - j0);
      // The block's panels: packed beforehand (GemmOptions::packed_b: panel
      // j0 / 16 at j0 * K), or copied here from B's rows.
      const T* ready = nullptr;
      if constexpr (std::is_same_v<T, float>) ready = o.packed_b ? o.packed_b + j0 * s.k : nullptr;
      if (!ready) pack_panels(b + j0 * s.ldb, cols, s.ldb, s.k, panel);
      const T* block = ready ? ready : panel;
#if defined(__x86_64__)
      if constexpr (std::is_same_v<T, float>)
        if (path != RowGemmPath::portable) {
          const int64_t next_cols = std::clamp<int64_t>(s.n - j0 - block_cols, 0, block_cols);
          Ahead ahead;
          if (next_cols > 0 && ready)  // the next block's panels, one run of memory
            ahead = Ahead(ready + block_cols * s.k, 1, (next_cols + kPanel - 1) / kPanel * panel_size, 0);
          else if (next_cols > 0)
            ahead = Ahead(b + (j0 + block_cols) * s.ldb, next_cols, s.k, s.ldb);
          if (path == RowGemmPath::avx2)
            panel_simd<kTileRows>(s, a, block, c, e, j0, cols, ahead, tile_avx2<kTileRows>,
                                  tail_avx2<kTileRows - 1>);
          else if (asks && cols > kPanel)
            panel_simd<kTileRows512>(s, a_tiles, block, c, e, j0, cols, ahead, tile_avx512<kTileRows512, 2, true>,
                                     tail_avx512<kTileRows512 - 1, 2, true>);
          else if (cols > kPanel)
            panel_simd<kTileRows512>(s, a_tiles, block, c, e, j0, cols, ahead, tile_avx512<kTileRows512, 2, false>,
                                     tail_avx512<kTileRows512 - 1, 2, false>);
          else
            panel_simd<kTileRows512>(s, a_tiles, block, c, e, j0, cols, ahead, tile_avx512<kTileRows512, 1, false>,
                                     tail_avx512<kTileRows512 - 1, 1, false>);
          continue;
        }
#endif
      panel_portable(s, a, block, c, e, j0, cols);
    }
  }
}

static_assert(kPanel == kPanelRows, "gemm.h's panels are gemm_rows.cc's");

int64_t panels_size(int64_t rows, int64_t cols) { return (rows + kPanel - 1) / kPanel * kPanel * cols; }

void pack_panels(const float* w, int64_t rows, int64_t cols, float* out) { pack_panels(w, rows, cols, cols, out); }

template void gemm_row_invariant<float>(const GemmShape&, const float*, const float*, float*,
                                        const float*, const GemmOptions&, RowGemmPath);
template void gemm_row_invariant<double>(const GemmShape&, const double*, const double*, double*,
                                         const double*, const GemmOptions&, RowGemmPath);

}  // namespace tfm::ops::cpu
