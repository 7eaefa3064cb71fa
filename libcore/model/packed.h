// The model's weights laid out once as the decoder's f32 GEMM reads them,
// for inference on the CPU (ModelWeights::pack_weights): every matrix that
// inference multiplies by (ParamLayout::multiplied), in panels of 16 rows
// (ops.h, pack_panels). The row-invariant GEMM otherwise copies each
// weight into that layout on every call: at the decoder's 64-128 rows a
// fifth of its time at the demo model's K = 128 (tests/bench/NOTES.md).
// The values are the parameters' own, so the products keep their bits.
//
// Matrices that lie side by side in the f32 buffer with the same width are
// packed as one (attention's q, k and v) where each starts on a whole panel,
// so that a view of rows of several of them is one run of panels too, when
// its first row is a multiple of 16.
#pragma once

#include <cstdint>
#include <vector>

#include "libcore/base/tensor.h"
#include "libcore/model/params.h"

namespace tfm::model {

// The runs of panels that matrices lying in offset order in one buffer
// form (PackedWeights, Int8Weights::pack): a matrix of the last run's
// width that starts where that run ends joins it if the run ends on a
// whole panel (ops::kPanelRows rows), so that the matrix itself still
// starts on one.
struct MatrixExtent {
  int64_t offset, rows, cols;  // in elements of the buffer
};
struct PanelRun {
  int64_t offset, rows, cols;  // offset: its first matrix's
  size_t first, count;         // its matrices, indices into panel_runs' input
};
std::vector<PanelRun> panel_runs(const std::vector<MatrixExtent>& matrices);

class PackedWeights {
 public:
  // Packs the matrices of `params` (the flat f32 buffer, on the CPU).
  PackedWeights(const ParamLayout& layout, const TensorView& params);

  // The panels of w, a view into the buffer given at construction of rows
  // of packed matrices; nullptr when w starts mid-panel or is not one
  // (the GEMM then packs it itself: the same bits).
  const float* find(const TensorView& w) const;

  size_t bytes() const { return sizeof(float) * static_cast<size_t>(floats_); }

 private:
  struct Run {
    int64_t offset;        // its first matrix's, in the f32 buffer (elements)
    int64_t rows, cols;
    int64_t panel_offset;  // into panels_
  };
  const float* base_;
  std::vector<Run> runs_;  // by offset
  // 64-byte aligned, as are the panels in it (each a multiple of 16 floats):
  // a tile's load of a panel's row is then one cache line. On 2 MiB pages
  // from 2 MiB (a Tensor's memory, device_alloc): on 4 KiB ones the TLB's
  // misses made the packed GEMM 10-20% slower than packing each call at
  // base's shapes (tests/bench/gemm).
  Tensor panels_;
  int64_t floats_ = 0;
};

}  // namespace tfm::model
