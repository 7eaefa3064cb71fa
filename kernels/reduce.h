// Reductions: bias gradients, sums of squares, scaling.
// Part of the op catalogue: kernels/ops.h gives the contract every op keeps.
#pragma once

#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"

namespace tfm::ops {

// ---------------------------------------------------------- reduce: reductions

// out[n] += sum_r x[r, n]                               x (R, N), out (N) +=  (bias grads)
void sum_rows(const TensorView& x, const TensorView& out, const Stream& stream);

// out[0] = sum_i x[i]^2                                 x any shape, out (1) f32 (f64 for f64) =
void sum_squares(const TensorView& x, const TensorView& out, const Stream& stream);

// x *= alpha                                            (in place)
void scale(const TensorView& x, float alpha, const Stream& stream);

}  // namespace tfm::ops

// The devices' implementations, declared once for both: reduce.cc calls
// impl::OP<D> through on_device once a call is valid; cpu/reduce.cc and
// cuda/reduce.cu define the specializations. Not for callers.
namespace tfm::ops::impl {

template <DeviceType D>
void sum_rows(const TensorView& x, const TensorView& out, const Stream& stream);
template <DeviceType D>
void sum_squares(const TensorView& x, const TensorView& out, const Stream& stream);
template <DeviceType D>
void scale(const TensorView& x, float alpha, const Stream& stream);

}  // namespace tfm::ops::impl
