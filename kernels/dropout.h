// Dropout, its mask recomputed from a Philox key.
// Part of the op catalogue: kernels/ops.h gives the contract every op keeps.
#pragma once

#include "libcore/base/rng.h"
#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"

namespace tfm::ops {

// --------------------------------------------------------------------- dropout
// keep_i = uniform01(philox_bits(key, i)) >= p, i the flat element index.
// The mask is never stored: backward recomputes it from the key, and a CPU
// and a GPU run with the same key drop the same elements. p in [0, 1).

// y = x * keep / (1 - p)                               (y =; y may be x; p = 0 copies)
void dropout_forward(const TensorView& x, float p, const RngKey& key, const TensorView& y,
                     const Stream& stream);

// dx = dy * keep / (1 - p)                             (dx =; dx may be dy)
void dropout_backward(const TensorView& dy, float p, const RngKey& key, const TensorView& dx,
                      const Stream& stream);

// Attention-weight dropout over padded tiles. x and y are (G, Tp, Sp) and
// hold the weights of a (G, T, S) tile in their top-left corners (T <= Tp,
// S <= Sp; CUDA pads attention to multiples of 8 for aligned GEMMs, the CPU
// does not pad). Element (g, i, j) is kept as dropout keeps element
// (g T + i) S + j of the unpadded tile, so a padded and an unpadded run drop
// the same weights; with Tp = T and Sp = S this is dropout_forward.
//   y = x * keep / (1 - p) in the corner, 0 in the padding   (y =; y may be x)
// Backward is the same map applied to dy (same key, same mask).
void attention_dropout(const TensorView& x, int64_t t, int64_t s, float p, const RngKey& key,
                       const TensorView& y, const Stream& stream);

// Pre-norm residual: y = residual + dropout(s)          (y =; y may be residual)
// Its backward: the residual's gradient is dy itself; ds = dropout_backward(dy).
void add_dropout_forward(const TensorView& residual, const TensorView& s, float p,
                         const RngKey& key, const TensorView& y, const Stream& stream);

}  // namespace tfm::ops

// The devices' implementations, declared once for both: dropout.cc calls
// impl::OP<D> through on_device once a call is valid; cpu/dropout.cc and
// cuda/dropout.cu define the specializations. Not for callers.
namespace tfm::ops::impl {

template <DeviceType D>
void dropout_forward(const TensorView& x, float p, const RngKey& key, const TensorView& y,
                     const Stream& stream);
template <DeviceType D>
void dropout_backward(const TensorView& dy, float p, const RngKey& key, const TensorView& dx,
                      const Stream& stream);
template <DeviceType D>
void attention_dropout(const TensorView& x, int64_t t, int64_t s, float p, const RngKey& key,
                       const TensorView& y, const Stream& stream);
template <DeviceType D>
void add_dropout_forward(const TensorView& residual, const TensorView& s, float p,
                         const RngKey& key, const TensorView& y, const Stream& stream);

}  // namespace tfm::ops::impl
