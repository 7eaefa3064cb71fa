#include "libcore/model/packed.h"

#include <algorithm>

#include "kernels/ops.h"
#include "libcore/error.h"

namespace tfm::model {

PackedWeights::PackedWeights(const ParamLayout& layout, const TensorView& params)
    : base_(static_cast<const float*>(params.data())) {
  TFM_REQUIRE(params.device().is_cpu() && params.dtype() == DType::f32,
              "internal: packed weights are for f32 parameters on the CPU");
  // Entries lie in offset order: a matrix that starts where the last run
  // ends, with its width, extends it if that run ends on a whole panel (so
  // that the matrix itself still starts on one).
  for (int id = 0; id < static_cast<int>(layout.entries().size()); ++id) {
    if (!layout.multiplied(id)) continue;
    const ParamEntry& e = layout.entry(id);
    const int64_t rows = e.shape[0], cols = e.shape[1];
    const Run* last = runs_.empty() ? nullptr : &runs_.back();
    if (last && last->cols == cols && last->offset + last->rows * cols == e.offset && last->rows % ops::kPanelRows == 0)
      runs_.back().rows += rows;
    else
      runs_.push_back({e.offset, rows, cols, 0});
  }
  for (Run& r : runs_) {
    r.panel_offset = floats_;
    floats_ += ops::panels_floats(r.rows, r.cols);
  }
  panels_ = Tensor({std::max<int64_t>(floats_, 1)}, DType::f32);
  for (const Run& r : runs_) {
    const TensorView w(const_cast<float*>(base_) + r.offset, DType::f32, {r.rows, r.cols}, Device::cpu());
    ops::pack_panels(w, panels_.data_as<float>() + r.panel_offset);
  }
}

const float* PackedWeights::find(const TensorView& w) const {
  if (w.rank() != 2 || w.dtype() != DType::f32 || !w.device().is_cpu()) return nullptr;
  const int64_t offset = static_cast<const float*>(w.data()) - base_, rows = w.dim(0), cols = w.dim(1);
  auto it = std::upper_bound(runs_.begin(), runs_.end(), offset,
                             [](int64_t o, const Run& r) { return o < r.offset; });
  if (it == runs_.begin()) return nullptr;
  const Run& r = *--it;
  const int64_t within = offset - r.offset;
  if (r.cols != cols || within % cols != 0) return nullptr;
  const int64_t row0 = within / cols;
  if (row0 % ops::kPanelRows != 0 || row0 + rows > r.rows) return nullptr;
  return panels_.data_as<float>() + r.panel_offset + row0 * cols;
}

}  // namespace tfm::model
