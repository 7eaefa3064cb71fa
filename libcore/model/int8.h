// The model's weights in 8 bits, for int8 inference on the CPU (tfm-decode
// and tfm-score --precision int8): every linear layer's weight and the
// output projection (the target embedding), quantized once by rows
// (ops.h, "int8"). Activations stay f32 between the GEMMs, and so do the
// embedding lookups, layer norms, attention and softmax: only x W^T is
// computed in int8, as CTranslate2 and Marian do on CPUs.
//
// The layers find a matrix's quantized form from the view of the f32
// parameter buffer they would multiply by (Blocks::int8): one parameter,
// or parameters side by side in a group (ParamLayout::view(flat, first,
// last): attention's q, k and v). The quantized rows are laid out in the
// same order, so a group is one Int8Matrix too.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "libcore/base/tensor.h"
#include "libcore/model/params.h"

namespace tfm::model {

class Int8Weights {
 public:
  // Quantizes the matrices of `params` (the flat f32 buffer, on the CPU):
  // every rank-2 parameter but the learned positions and a source
  // embedding that is not also the target's (looked up, never multiplied).
  Int8Weights(const ParamLayout& layout, const TensorView& params);

  // The quantized form of w, a view into the buffer given at construction
  // of one matrix, or of rows of matrices that lie side by side. Throws
  // (internal) for anything else. With its panels (Int8Matrix::panels)
  // once pack() has run, where its first row starts a panel.
  ops::Int8Matrix find(const TensorView& w) const;

  // The quantized rows laid out once more as gemm_int8's panels
  // (ops::pack_int8_panels), which it then reads instead of copying them
  // on every call: the same bits. Adjacent matrices of one width are packed
  // as one run where each starts on a whole panel (attention's q, k and v),
  // as model::PackedWeights does the f32 ones.
  void pack();

  size_t bytes() const {
    return static_cast<size_t>(values_.numel()) * sizeof(int32_t) + scales_.size() * (sizeof(float) + sizeof(int32_t));
  }
  size_t packed_bytes() const { return static_cast<size_t>(panels_.numel()) * sizeof(int32_t); }

 private:
  struct Matrix {
    int64_t offset;        // the parameter's, in the f32 buffer (elements)
    int64_t rows, cols;
    int64_t value_offset;  // into values_ (rows of ld bytes)
    int64_t scale_offset;  // into scales_ and sums_
    int64_t run = -1;      // its run of panels (pack)
    int64_t run_row = 0;   // the run's row its first row is
  };
  struct Run {
    int64_t rows, ld;
    int64_t value_offset;  // its first matrix's
    int64_t panel_offset;  // into panels_
  };
  int8_t* values() const { return reinterpret_cast<int8_t*>(values_.data_as<int32_t>()); }

  const float* base_;
  std::vector<Matrix> matrices_;  // by offset
  // The quantized rows (bytes, four an i32; rows of ld bytes, a multiple of
  // 32) and their panels: Tensors, whose memory is on 2 MiB pages from
  // 2 MiB (device_alloc), as the f32 weights': the GEMMs stream them every
  // step (model/packed.h).
  Tensor values_;
  std::vector<float> scales_;
  std::vector<int32_t> sums_;
  std::vector<Run> runs_;
  Tensor panels_;
};

}  // namespace tfm::model
