// Validation and dispatch of the reduce ops (reduce.h).
#include "kernels/reduce.h"

#include "kernels/dispatch.h"

namespace tfm::ops {

void sum_rows(const TensorView& x, const TensorView& out, const Stream& stream) {
  require_device("sum_rows", stream, {{"x", &x}, {"out", &out}});
  require_float("sum_rows", x, "x");
  TFM_REQUIRE(x.rank() >= 2, "sum_rows: x is {} but must be (R, N)", x.str());
  require_shape("sum_rows", out, "out", Shape{x.dim(-1)}, "N");
  require_param("sum_rows", out, "out", x, "x");
  if (x.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> { impl::sum_rows<D>(x, out, stream); });
}

void sum_squares(const TensorView& x, const TensorView& out, const Stream& stream) {
  require_device("sum_squares", stream, {{"x", &x}, {"out", &out}});
  require_float("sum_squares", x, "x");
  require_shape("sum_squares", out, "out", Shape{1}, "one value");
  require_stat("sum_squares", out, "out", x, "x");
  on_device(stream, [&]<DeviceType D> { impl::sum_squares<D>(x, out, stream); });
}

void scale(const TensorView& x, float alpha, const Stream& stream) {
  require_device("scale", stream, {{"x", &x}});
  require_float("scale", x, "x");
  if (x.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> { impl::scale<D>(x, alpha, stream); });
}

}  // namespace tfm::ops
