// Validation and dispatch of the elementwise ops (elementwise.h).
#include "kernels/elementwise.h"

#include "kernels/dispatch.h"

namespace tfm::ops {

void add(const TensorView& a, const TensorView& b, const TensorView& y, const Stream& stream) {
  require_device("add", stream, {{"a", &a}, {"b", &b}, {"y", &y}});
  require_float("add", a, "a");
  require_same("add", a, "a", b, "b");
  require_same("add", a, "a", y, "y");
  on_device(stream, [&]<DeviceType D> { impl::add<D>(a, b, y, stream); });
}

void scaled_difference(const TensorView& x, const TensorView& base, float w, const TensorView& y,
                       const Stream& stream) {
  require_device("scaled_difference", stream, {{"x", &x}, {"base", &base}, {"y", &y}});
  require_float("scaled_difference", x, "x");
  require_same("scaled_difference", x, "x", base, "base");
  require_same("scaled_difference", x, "x", y, "y");
  on_device(stream, [&]<DeviceType D> { impl::scaled_difference<D>(x, base, w, y, stream); });
}

void relu_forward(const TensorView& x, const TensorView& y, const Stream& stream) {
  require_device("relu_forward", stream, {{"x", &x}, {"y", &y}});
  require_float("relu_forward", x, "x");
  require_same("relu_forward", x, "x", y, "y");
  on_device(stream, [&]<DeviceType D> { impl::relu_forward<D>(x, y, stream); });
}

void relu_backward(const TensorView& y, const TensorView& dy, const TensorView& dx,
                   const Stream& stream) {
  require_device("relu_backward", stream, {{"y", &y}, {"dy", &dy}, {"dx", &dx}});
  require_float("relu_backward", y, "y");
  require_same("relu_backward", y, "y", dy, "dy");
  require_same("relu_backward", y, "y", dx, "dx");
  on_device(stream, [&]<DeviceType D> { impl::relu_backward<D>(y, dy, dx, stream); });
}

void activation_forward(const TensorView& x, Activation act, const TensorView& y, const Stream& stream) {
  require_device("activation_forward", stream, {{"x", &x}, {"y", &y}});
  require_float("activation_forward", x, "x");
  require_same("activation_forward", x, "x", y, "y");
  on_device(stream, [&]<DeviceType D> { impl::activation_forward<D>(x, act, y, stream); });
}

void activation_backward(const TensorView& x, const TensorView& dy, Activation act, const TensorView& dx,
                         const Stream& stream) {
  require_device("activation_backward", stream, {{"x", &x}, {"dy", &dy}, {"dx", &dx}});
  require_float("activation_backward", x, "x");
  require_same("activation_backward", x, "x", dy, "dy");
  require_same("activation_backward", x, "x", dx, "dx");
  on_device(stream, [&]<DeviceType D> { impl::activation_backward<D>(x, dy, act, dx, stream); });
}

void cast(const TensorView& x, const TensorView& y, const Stream& stream) {
  require_device("cast", stream, {{"x", &x}, {"y", &y}});
  for (const auto& [t, name] : {std::pair{&x, "x"}, std::pair{&y, "y"}}) {
    const bool ok = t->dtype() == DType::f32 || t->dtype() == DType::bf16 ||
                    t->dtype() == DType::f16 || (t->device().is_cpu() && t->dtype() == DType::f64);
    TFM_REQUIRE(ok, "cast: {} is {}, not a float dtype cast supports here", name, t->str());
  }
  TFM_REQUIRE(x.shape() == y.shape(), "cast: x is {} but y is {}", x.str(), y.str());
  if (x.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> { impl::cast<D>(x, y, stream); });
}

void copy_columns(const TensorView& x, int64_t col, const TensorView& y, const Stream& stream) {
  require_device("copy_columns", stream, {{"x", &x}, {"y", &y}});
  TFM_REQUIRE(x.rank() == 2 && y.rank() == 2, "copy_columns: x is {} and y is {}; both must be 2-D",
              x.str(), y.str());
  TFM_REQUIRE(x.dtype() == y.dtype(), "copy_columns: x is {} but y is {}", x.str(), y.str());
  TFM_REQUIRE(x.dim(0) == y.dim(0) && col >= 0 && col + y.dim(1) <= x.dim(1),
              "copy_columns: columns [{}, {}) of x {} into y {}", col, col + y.dim(1), x.str(), y.str());
  if (y.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> { impl::copy_columns<D>(x, col, y, stream); });
}

void scatter_columns(const TensorView& x, int64_t col, const TensorView& index, const TensorView& y,
                     const Stream& stream) {
  const char* op = "scatter_columns";
  require_device(op, stream, {{"x", &x}, {"index", &index}, {"y", &y}});
  require_i32(op, index, "index");
  TFM_REQUIRE(x.rank() == 2 && y.rank() == 2, "{}: x is {} and y is {}; both must be 2-D", op,
              x.str(), y.str());
  TFM_REQUIRE(x.dtype() == y.dtype(), "{}: x is {} but y is {}", op, x.str(), y.str());
  TFM_REQUIRE(col >= 0 && col + y.dim(1) <= x.dim(1), "{}: columns [{}, {}) of x {} into y {}", op,
              col, col + y.dim(1), x.str(), y.str());
  require_shape(op, index, "index", Shape{x.dim(0)}, "R");
  if (x.dim(0) == 0 || y.dim(1) == 0) return;
  on_device(stream, [&]<DeviceType D> { impl::scatter_columns<D>(x, col, index, y, stream); });
}

void uniform(const TensorView& out, const RngKey& key, float lo, float hi, const Stream& stream) {
  require_device("uniform", stream, {{"out", &out}});
  require_float("uniform", out, "out");
  TFM_REQUIRE(lo <= hi, "uniform: lo {} is above hi {}", lo, hi);
  on_device(stream, [&]<DeviceType D> { impl::uniform<D>(out, key, lo, hi, stream); });
}

}  // namespace tfm::ops
