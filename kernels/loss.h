// The output layer: log-softmax and label-smoothed cross-entropy.
// Part of the op catalogue: kernels/ops.h gives the contract every op keeps.
#pragma once

#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"

namespace tfm::ops {

// ------------------------------------------------------ loss: the output layer

// y = log_softmax(x) over the last dimension            x, y (N, V) (y =; may alias)
void log_softmax(const TensorView& x, const TensorView& y, const Stream& stream);

// Label-smoothed cross-entropy over rows of logits (N, V), forward and
// backward at once, in place. For a row n with target t = targets[n] >= 0:
//   logp = log_softmax(logits[n])
//   loss_n = (1 - eps) * -logp[t] + eps * mean_v(-logp[v])   (PyTorch's label_smoothing)
//   logits[n, :] := grad_scale * (softmax(logits[n]) - (1 - eps) * onehot(t) - eps / V)
// A row with t < 0 (padding) adds nothing and gets zeros. targets (N) i32.
// sums (2) f32 (f64 for f64 logits) += {sum_n loss_n, sum_n -logp[t]}
// dlogits (N, V): where the gradient goes instead of logits (logits is then
// only read), on CUDA in any float dtype: a 16-bit dlogits is what the
// output layer's backward GEMMs read, written in the same pass that reads
// the logits (no separate cast). Empty: in place, as above.
void smoothed_cross_entropy(const TensorView& logits, const TensorView& targets, float eps,
                            float grad_scale, const TensorView& sums, const Stream& stream,
                            const TensorView& dlogits = {});

}  // namespace tfm::ops

// The devices' implementations, declared once for both: loss.cc calls
// impl::OP<D> through on_device once a call is valid; cpu/loss.cc and
// cuda/loss.cu define the specializations. Not for callers.
namespace tfm::ops::impl {

template <DeviceType D>
void log_softmax(const TensorView& x, const TensorView& y, const Stream& stream);
template <DeviceType D>
void smoothed_cross_entropy(const TensorView& logits, const TensorView& targets, float eps,
                            float grad_scale, const TensorView& sums, const TensorView& dlogits,
                            const Stream& stream);

}  // namespace tfm::ops::impl
