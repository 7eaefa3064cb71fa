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
  // (internal) for anything else.
  ops::Int8Matrix find(const TensorView& w) const;

  size_t bytes() const { return values_.size() + scales_.size() * (sizeof(float) + sizeof(int32_t)); }

 private:
  struct Matrix {
    int64_t offset;        // the parameter's, in the f32 buffer (elements)
    int64_t rows, cols;
    int64_t value_offset;  // into values_ (rows of ld bytes)
    int64_t scale_offset;  // into scales_ and sums_
  };
  const float* base_;
  std::vector<Matrix> matrices_;  // by offset
  std::vector<int8_t> values_;
  std::vector<float> scales_;
  std::vector<int32_t> sums_;
};

}  // namespace tfm::model
