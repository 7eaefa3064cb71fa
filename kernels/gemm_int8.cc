// Validation and dispatch of the gemm_int8 ops (gemm_int8.h).
#include "kernels/gemm_int8.h"

#include "kernels/cpu/gemm_int8.h"
#include "kernels/dispatch.h"

namespace tfm::ops {

void pack_int8_panels(const int8_t* values, int64_t rows, int64_t ld, int32_t* panels) {
  TFM_REQUIRE(rows >= 0 && ld > 0 && ld % kInt8RowAlign == 0,
              "pack_int8_panels: {} rows of {} bytes are not quantized rows", rows, ld);
  cpu::pack_int8_panels(values, rows, ld, panels);
}


namespace {
// int8 runs on the CPU alone, in f32.
void require_int8_input(const char* op, const Stream& stream, const TensorView& t, const char* name) {
  TFM_REQUIRE(stream.device().is_cpu(), "{}: int8 inference runs on the CPU (on a GPU: --precision bf16)", op);
  require_device(op, stream, {{name, &t}});
  TFM_REQUIRE(t.dtype() == DType::f32, "{}: {} is {} but must be f32", op, name, dtype_name(t.dtype()));
}
}  // namespace

void quantize_int8(const TensorView& w, int8_t* values, int64_t ld, float* scales, int32_t* sums) {
  const char* op = "quantize_int8";
  require_int8_input(op, Stream(Device::cpu()), w, "w");
  TFM_REQUIRE(w.rank() == 2, "{}: w is {} but must be a matrix", op, w.str());
  const int64_t rows = w.dim(0), cols = w.dim(1);
  TFM_REQUIRE(ld >= cols && ld % kInt8RowAlign == 0, "{}: ld {} must be >= {} and a multiple of {}", op, ld,
              cols, kInt8RowAlign);
  const float* p = static_cast<const float*>(w.data());
  for (int64_t j = 0; j < rows; ++j) {
    int8_t* row = values + j * ld;
    scales[j] = cpu::quantize_row_int8(p + j * cols, cols, row, ld);
    int32_t sum = 0;
    for (int64_t q = 0; q < cols; ++q) sum += row[q];
    sums[j] = sum;
  }
}

void gemm_int8(const TensorView& x, const Int8Matrix& w, const TensorView& y, const Stream& stream,
               const TensorView& bias, bool relu) {
  const char* op = "gemm_int8";
  require_int8_input(op, stream, x, "x");
  require_int8_input(op, stream, y, "y");
  TFM_REQUIRE(x.rank() == 2 && y.rank() == 2, "{}: x and y must be matrices, got {} and {}", op,
              x.shape().str(), y.shape().str());
  const int64_t m = x.dim(0);
  TFM_REQUIRE(x.dim(1) == w.cols && w.cols > 0 && w.cols < (int64_t{1} << 17),
              "{}: x is {} but W is {} x {} (0 < K < 131072)", op, x.shape().str(), w.rows,
              w.cols);
  TFM_REQUIRE(w.ld >= w.cols && w.ld % kInt8RowAlign == 0 && w.values && w.scales && w.sums,
              "{}: W's rows are not quantized rows (ld {})", op, w.ld);
  TFM_REQUIRE(y.dim(0) == m && y.dim(1) == w.rows, "{}: y is {} but x W^T is {} x {}", op, y.shape().str(), m,
              w.rows);
  if (!bias.empty()) {
    require_int8_input(op, stream, bias, "bias");
    TFM_REQUIRE(bias.rank() == 1 && bias.dim(0) == w.rows, "{}: bias is {} but y has {} columns", op,
                bias.shape().str(), w.rows);
  }
  if (m == 0 || w.rows == 0) return;
  cpu::gemm_int8(static_cast<const float*>(x.data()), m, x.dim(1), w, static_cast<float*>(y.data()), y.dim(1),
                 bias.empty() ? nullptr : static_cast<const float*>(bias.data()), relu);
}

}  // namespace tfm::ops
