// What kernels/ops.cc hands the device implementations once a call has been
// validated: shapes reduced to numbers. Not part of the op catalogue.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace tfm::ops::detail {

// One (batched, strided) row-major GEMM: C[g] = op(A[g]) op(B[g]), M x N x K.
// A stride of 0 means every batch entry shares one matrix.
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;               // row pitch, in elements
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // matrix pitch, in elements
};

}  // namespace tfm::ops::detail

namespace tfm::ops::cpu {
using detail::GemmShape;
void gemm(const GemmShape& s, const TensorView& a, const TensorView& b, const TensorView& c,
          const TensorView& bias, const GemmOptions& o);
void add(const TensorView& a, const TensorView& b, const TensorView& y);
void relu_forward(const TensorView& x, const TensorView& y);
void relu_backward(const TensorView& y, const TensorView& dy, const TensorView& dx);
void uniform(const TensorView& out, const RngKey& key, float lo, float hi);
}  // namespace tfm::ops::cpu

namespace tfm::ops::cuda {
using detail::GemmShape;
void gemm(const GemmShape& s, const TensorView& a, const TensorView& b, const TensorView& c,
          const TensorView& bias, const GemmOptions& o, const Stream& stream);
void add(const TensorView& a, const TensorView& b, const TensorView& y, const Stream& stream);
void relu_forward(const TensorView& x, const TensorView& y, const Stream& stream);
void relu_backward(const TensorView& y, const TensorView& dy, const TensorView& dx,
                   const Stream& stream);
void uniform(const TensorView& out, const RngKey& key, float lo, float hi, const Stream& stream);
}  // namespace tfm::ops::cuda
