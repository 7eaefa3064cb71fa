#include "libcore/model/packed.h"

#include <algorithm>

#include "kernels/ops.h"
#include "libcore/base/error.h"

namespace tfm::model {

std::vector<PanelRun> panel_runs(const std::vector<MatrixExtent>& matrices) {
  std::vector<PanelRun> runs;
  for (size_t j = 0; j < matrices.size(); ++j) {
    const MatrixExtent& m = matrices[j];
    PanelRun* last = runs.empty() ? nullptr : &runs.back();
    if (last && last->cols == m.cols && last->offset + last->rows * m.cols == m.offset &&
        last->rows % ops::kPanelRows == 0) {
      last->rows += m.rows;
      ++last->count;
    } else {
      runs.push_back({m.offset, m.rows, m.cols, j, 1});
    }
  }
  return runs;
}

PackedWeights::PackedWeights(const ParamLayout& layout, const TensorView& params)
    : base_(static_cast<const float*>(params.data())) {
  TFM_REQUIRE(params.device().is_cpu() && params.dtype() == DType::f32,
              "internal: packed weights are for f32 parameters on the CPU");
  std::vector<MatrixExtent> matrices;
  for (int id = 0; id < static_cast<int>(layout.entries().size()); ++id) {
    if (!layout.multiplied(id)) continue;
    const ParamEntry& e = layout.entry(id);
    matrices.push_back({e.offset, e.shape[0], e.shape[1]});
  }
  for (const PanelRun& r : panel_runs(matrices)) runs_.push_back({r.offset, r.rows, r.cols, 0});
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
