// The row-invariant GEMM of the CPU (gemm_rows.cc), which gemm runs for
// GemmOptions::row_invariant, and its panels; shared with the int8 GEMM
// (gemm_int8.h) and read by the tests and benchmarks that pick a path.
#pragma once

#include <cstdint>

#include "kernels/gemm.h"

namespace tfm::ops::cpu {

using impl::GemmShape;

// gemm with row_invariant: C = act(alpha A B^T + beta C + bias) for one A
// (M, K) and one B (N, K), by `path`: every path gives the same bits (tests
// compare them); one the CPU lacks runs as the best it has below it. f64
// runs the portable path.
enum class RowGemmPath { portable, avx2, avx512, best };
template <typename T>
void gemm_row_invariant(const GemmShape& s, const T* a, const T* b, T* c, const T* bias,
                        const GemmOptions& o, RowGemmPath path = RowGemmPath::best);
RowGemmPath gemm_row_invariant_path();  // the path `best` takes on this CPU (never best)
const char* row_gemm_path_name(RowGemmPath path);  // "AVX-512", "AVX2", "portable"

// W (rows, cols) f32 as gemm_row_invariant's panels (GemmOptions::packed_b),
// panels_size(rows, cols) floats: 16 rows a panel, the last padded with zeros.
int64_t panels_size(int64_t rows, int64_t cols);
void pack_panels(const float* w, int64_t rows, int64_t cols, float* out);

}  // namespace tfm::ops::cpu
