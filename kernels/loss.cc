// Validation and dispatch of the loss ops (loss.h).
#include "kernels/loss.h"

#include "kernels/dispatch.h"

namespace tfm::ops {

void log_softmax(const TensorView& x, const TensorView& y, const Stream& stream) {
  require_device("log_softmax", stream, {{"x", &x}, {"y", &y}});
  require_float("log_softmax", x, "x");
  TFM_REQUIRE(x.rank() >= 2 && x.dim(-1) > 0, "log_softmax: x is {} but must be (N, V) with V > 0",
              x.str());
  require_same("log_softmax", x, "x", y, "y");
  if (x.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> { impl::log_softmax<D>(x, y, stream); });
}

void smoothed_cross_entropy(const TensorView& logits, const TensorView& targets, float eps,
                            float grad_scale, const TensorView& sums, const Stream& stream,
                            const TensorView& dlogits_or_empty) {
  const char* op = "smoothed_cross_entropy";
  const TensorView& dlogits = dlogits_or_empty.empty() ? logits : dlogits_or_empty;
  require_device(op, stream, {{"logits", &logits}, {"targets", &targets}, {"sums", &sums},
                              {"dlogits", &dlogits}});
  require_float(op, dlogits, "dlogits");
  TFM_REQUIRE(dlogits.shape() == logits.shape(), "{}: dlogits is {} but logits is {}", op,
              dlogits.str(), logits.str());
  TFM_REQUIRE(dlogits.data() != logits.data() || dlogits.dtype() == logits.dtype(),
              "{}: dlogits is logits in another dtype", op);
  TFM_REQUIRE(logits.device().is_cuda() || dlogits.dtype() == logits.dtype(),
              "{}: dlogits is {} but logits is {} (the cpu writes the gradient in the logits' dtype)",
              op, dtype_name(dlogits.dtype()), dtype_name(logits.dtype()));
  require_float(op, logits, "logits");
  TFM_REQUIRE(logits.rank() == 2 && logits.dim(1) > 0,
              "{}: logits is {} but must be (N, V) with V > 0", op, logits.str());
  require_i32(op, targets, "targets");
  require_shape(op, targets, "targets", Shape{logits.dim(0)}, "N");
  require_shape(op, sums, "sums", Shape{2}, "loss sum and nll sum");
  require_stat(op, sums, "sums", logits, "logits");
  TFM_REQUIRE(eps >= 0.0f && eps <= 1.0f, "{}: label smoothing eps = {} is outside [0, 1]", op, eps);
  if (logits.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> {
    impl::smoothed_cross_entropy<D>(logits, targets, eps, grad_scale, sums, dlogits, stream);
  });
}

}  // namespace tfm::ops
