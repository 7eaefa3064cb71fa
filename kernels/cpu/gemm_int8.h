// The int8 GEMM of the CPU (gemm_int8.cc), which the int8 ops of
// kernels/gemm_int8.h run once a call is valid; read by the tests that pick
// a path.
#pragma once

#include <cstdint>

#include "kernels/cpu/gemm_rows.h"
#include "kernels/gemm_int8.h"

namespace tfm::ops::cpu {

// y = act(x W^T + bias) for x (m, K) f32 with row pitch ldx, y with ldy, by
// `path` (AVX-512: with BW): every path gives the same bits; one the CPU
// lacks runs as the best it has below it.
// Who multiplies on the AVX-512 path: AMX's tiles (where the CPU has them
// and K is a multiple of 64), else AVX-512 VNNI's vpdpbusd, else AVX-512BW's
// three instructions (best: the first the CPU has); vnni: not AMX; bw:
// neither. The same bits every way.
enum class Int8Products { best, vnni, bw };
void gemm_int8(const float* x, int64_t m, int64_t ldx, const Int8Matrix& w, float* y, int64_t ldy,
               const float* bias, bool relu, RowGemmPath path = RowGemmPath::best,
               Int8Products products = Int8Products::best);
RowGemmPath gemm_int8_path();  // the path `best` takes on this CPU: at most gemm_row_invariant_path()'s
// Whether the AVX-512 path may use AMX here: the CPU has AMX-INT8, the
// kernel grants the tiles' state (Linux 5.16 and later), and TFM_INT8_AMX
// is not 0 (an A/B switch).
bool gemm_int8_amx();
// Whether it may use VNNI: the CPU has AVX512_VNNI and TFM_INT8_VNNI is not 0.
bool gemm_int8_vnni();

// W's quantized rows (rows, ld) as gemm_int8's panels (Int8Matrix::panels),
// panels_size(rows, ld / 4) int32s.
void pack_int8_panels(const int8_t* values, int64_t rows, int64_t ld, int32_t* panels);

// One row of n values into q (ld bytes, zero past n), in [-limit, limit];
// returns its scale, max |v| / limit (kernels/gemm_int8.h, quantize_int8;
// gemm_int8's rows of x: kInt8InputLimit). simd false: the portable path,
// the same bits.
float quantize_row_int8(const float* v, int64_t n, int8_t* q, int64_t ld, bool simd = true, int limit = 127);

}  // namespace tfm::ops::cpu
