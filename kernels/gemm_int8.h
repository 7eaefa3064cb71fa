// int8 inference on the CPU: weights quantized by rows, and their GEMM.
// CPU-only: no template for the devices (gemm_int8.cc calls cpu/gemm_int8.h).
// Part of the op catalogue: kernels/ops.h gives the contract every op keeps.
#pragma once

#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"

namespace tfm::ops {

// -------------- gemm_int8: int8 inference (CPU; quantize_int8 in gemm_int8.cc)
// Inference with 8-bit weights on the CPU (tfm-decode and tfm-score
// --precision int8; libcore/model/int8.h quantizes the model's). A matrix
// quantized by rows: row j is values[j, :] * scales[j], the values in
// [-127, 127], each row padded with zeros to ld, a multiple of kInt8RowAlign;
// sums[j] = sum_p values[j, p] (gemm_int8's AVX2 path needs them).
constexpr int64_t kInt8RowAlign = 32;
constexpr int kInt8InputLimit = 63;  // gemm_int8's x: quantized to [-63, 63]
struct Int8Matrix {
  const int8_t* values = nullptr;  // (rows, ld)
  const float* scales = nullptr;   // (rows)
  const int32_t* sums = nullptr;   // (rows)
  int64_t rows = 0, cols = 0, ld = 0;
  const int32_t* panels = nullptr;  // optional: the values as pack_int8_panels laid them out,
                                    // read instead of copying them into panels each call
};
inline int64_t int8_ld(int64_t cols) { return (cols + kInt8RowAlign - 1) / kInt8RowAlign * kInt8RowAlign; }

// gemm_int8 copies W's rows into panels of 16 as the float GEMM does, four
// bytes of a row as one 32-bit element. Weights quantized once can be laid
// out so once: values (R, ld) into panels (panels_floats(R, ld / 4) int32s,
// the last panel's rows past R zero), then Int8Matrix::panels: the same
// bits without the copy (rows [r0, r0 + n): panels + r0 ld / 4, r0 a
// multiple of kPanelRows).
void pack_int8_panels(const int8_t* values, int64_t rows, int64_t ld, int32_t* panels);

// The rows of w (R, C), f32 on the CPU, into values (R * ld), scales (R)
// and sums (R):
//   scales[j] = max_p |w[j, p]| / 127
//   values[j, p] = round(w[j, p] * 127 / max_p |w[j, p]|)   (to nearest, ties to even)
//   sums[j] = sum_p values[j, p]
// A zero row gets scale 0, a row with an inf or NaN scale NaN; padding is 0.
void quantize_int8(const TensorView& w, int8_t* values, int64_t ld, float* scales, int32_t* sums);

// y = act(x W^T + bias), x quantized by rows on the way, to kInt8InputLimit
// (W's rows go to 127):
//   sx[i] = max_p |x[i, p]| / 63,  qx[i, p] = round(x[i, p] * 63 / max_p |x[i, p]|)
//   y[i, j] = float(sum_p qx[i, p] qw[j, p]) * (sx[i] * sw[j]) + bias[j]   (then ReLU)
// the sum exact in int32, the rest in f32 in that order. Why 63: AVX2
// multiplies bytes only unsigned by signed (vpmaddubsw, two products summed
// in int16), so the AVX2 path feeds qx + 64 (in [1, 127]: a pair stays
// within int16) and takes 64 sums[j] back off, exactly; at 127 it would
// spend a third instruction a product on moving x's sign onto W. The BLEU
// of trained models is the same as with 127 (docs/benchmarks.md, int8).
// x (M, K) f32 on the CPU; w (N, K), K < 2^17; y (M, N) f32 =; bias (N)
// f32, optional. A row of y depends on its row of x alone, bit for bit (any
// M, any thread count, with AVX2 or without): batch invariance, as
// row_invariant's GEMM.
void gemm_int8(const TensorView& x, const Int8Matrix& w, const TensorView& y, const Stream& stream,
               const TensorView& bias = {}, bool relu = false);

}  // namespace tfm::ops
