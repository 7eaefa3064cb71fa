#include "libcore/model/int8.h"

#include <algorithm>

#include "libcore/base/error.h"
#include "libcore/model/packed.h"

namespace tfm::model {

Int8Weights::Int8Weights(const ParamLayout& layout, const TensorView& params)
    : base_(static_cast<const float*>(params.data())) {
  // The layout's entries lie in offset order, so the quantized rows of a
  // group lie side by side as its f32 rows do. (ops::quantize_int8 checks
  // that params are f32 on the CPU.)
  int64_t value_bytes = 0, scales = 0;
  for (int id = 0; id < static_cast<int>(layout.entries().size()); ++id) {
    if (!layout.multiplied(id)) continue;
    const ParamEntry& e = layout.entry(id);
    matrices_.push_back({e.offset, e.shape[0], e.shape[1], value_bytes, scales});
    value_bytes += e.shape[0] * ops::int8_ld(e.shape[1]);
    scales += e.shape[0];
  }
  values_ = Tensor({std::max<int64_t>(value_bytes / 4, 1)}, DType::i32);  // ld: a multiple of 32
  scales_.resize(static_cast<size_t>(scales));
  sums_.resize(static_cast<size_t>(scales));
  for (const Matrix& m : matrices_) {
    const TensorView w(const_cast<float*>(base_) + m.offset, DType::f32, {m.rows, m.cols}, Device::cpu());
    ops::quantize_int8(w, values() + m.value_offset, ops::int8_ld(m.cols), scales_.data() + m.scale_offset,
                       sums_.data() + m.scale_offset);
  }
}

ops::Int8Matrix Int8Weights::find(const TensorView& w) const {
  const int64_t offset = static_cast<const float*>(w.data()) - base_;
  const int64_t rows = w.rank() == 2 ? w.dim(0) : -1, cols = w.rank() == 2 ? w.dim(1) : -1;
  // The matrix that holds the view's first row.
  auto it = std::upper_bound(matrices_.begin(), matrices_.end(), offset,
                             [](int64_t o, const Matrix& m) { return o < m.offset; });
  TFM_REQUIRE(it != matrices_.begin() && rows >= 0, "internal: {} is not a quantized weight", w.str());
  --it;
  const Matrix& first = *it;
  const int64_t row0 = (offset - first.offset) / std::max<int64_t>(first.cols, 1);
  TFM_REQUIRE(first.cols == cols && offset == first.offset + row0 * cols && row0 < first.rows,
              "internal: {} at element {} is not rows of a quantized weight", w.str(), offset);
  // Its rows, then those of the matrices right after it in the same group.
  int64_t covered = first.rows - row0;
  for (auto next = it + 1; covered < rows; ++next) {
    const Matrix& prev = *(next - 1);
    TFM_REQUIRE(next != matrices_.end() && next->cols == cols && next->offset == prev.offset + prev.rows * cols,
                "internal: {} runs past the quantized weights it starts in", w.str());
    covered += next->rows;
  }
  const int64_t ld = ops::int8_ld(cols);
  ops::Int8Matrix m{values() + first.value_offset + row0 * ld, scales_.data() + first.scale_offset + row0,
                    sums_.data() + first.scale_offset + row0, rows, cols, ld};
  // Its panels: the view's rows all in the first matrix's run (runs hold
  // matrices of one width that lie side by side), from a whole panel.
  if (first.run >= 0) {
    const Run& run = runs_[static_cast<size_t>(first.run)];
    const int64_t at = first.run_row + row0;
    if (at % ops::kPanelRows == 0 && at + rows <= run.rows)
      m.panels = panels_.data_as<int32_t>() + run.panel_offset + at * ld / 4;
  }
  return m;
}

void Int8Weights::pack() {
  if (!runs_.empty()) return;
  // Runs as the f32 weights' (their quantized rows lie side by side as
  // their f32 rows do).
  std::vector<MatrixExtent> extents;
  for (const Matrix& m : matrices_) extents.push_back({m.offset, m.rows, m.cols});
  for (const PanelRun& r : panel_runs(extents)) {
    int64_t row = 0;
    for (size_t j = r.first; j < r.first + r.count; ++j) {
      matrices_[j].run = static_cast<int64_t>(runs_.size());
      matrices_[j].run_row = row;
      row += matrices_[j].rows;
    }
    runs_.push_back({r.rows, ops::int8_ld(r.cols), matrices_[r.first].value_offset, 0});
  }
  int64_t words = 0;
  for (Run& r : runs_) {
    r.panel_offset = words;
    words += ops::panels_floats(r.rows, r.ld / 4);
  }
  panels_ = Tensor({std::max<int64_t>(words, 1)}, DType::i32);
  for (const Run& r : runs_)
    ops::pack_int8_panels(values() + r.value_offset, r.rows, r.ld, panels_.data_as<int32_t>() + r.panel_offset);
}

}  // namespace tfm::model
