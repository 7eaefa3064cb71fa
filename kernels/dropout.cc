// Validation and dispatch of the dropout ops (dropout.h).
#include "kernels/dropout.h"

#include "kernels/dispatch.h"

namespace tfm::ops {

void dropout_forward(const TensorView& x, float p, const RngKey& key, const TensorView& y,
                     const Stream& stream) {
  require_device("dropout_forward", stream, {{"x", &x}, {"y", &y}});
  require_float("dropout_forward", x, "x");
  require_same("dropout_forward", x, "x", y, "y");
  require_p("dropout_forward", p);
  if (x.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> { impl::dropout_forward<D>(x, p, key, y, stream); });
}

void dropout_backward(const TensorView& dy, float p, const RngKey& key, const TensorView& dx,
                      const Stream& stream) {
  require_device("dropout_backward", stream, {{"dy", &dy}, {"dx", &dx}});
  require_float("dropout_backward", dy, "dy");
  require_same("dropout_backward", dy, "dy", dx, "dx");
  require_p("dropout_backward", p);
  if (dy.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> { impl::dropout_backward<D>(dy, p, key, dx, stream); });
}

void attention_dropout(const TensorView& x, int64_t t, int64_t s, float p, const RngKey& key,
                       const TensorView& y, const Stream& stream) {
  const char* op = "attention_dropout";
  require_device(op, stream, {{"x", &x}, {"y", &y}});
  require_float(op, x, "x");
  require_same(op, x, "x", y, "y");
  require_p(op, p);
  TFM_REQUIRE(x.rank() >= 2 && t >= 0 && s >= 0 && t <= x.dim(-2) && s <= x.dim(-1),
              "{}: a ({}, {}) tile does not fit the padded tiles of x {}", op, t, s, x.str());
  if (x.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> { impl::attention_dropout<D>(x, t, s, p, key, y, stream); });
}

void add_dropout_forward(const TensorView& residual, const TensorView& s, float p,
                         const RngKey& key, const TensorView& y, const Stream& stream) {
  const char* op = "add_dropout_forward";
  require_device(op, stream, {{"residual", &residual}, {"s", &s}, {"y", &y}});
  require_float(op, residual, "residual");
  require_same(op, residual, "residual", s, "s");
  require_same(op, residual, "residual", y, "y");
  require_p(op, p);
  if (y.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> {
    impl::add_dropout_forward<D>(residual, s, p, key, y, stream);
  });
}

}  // namespace tfm::ops
