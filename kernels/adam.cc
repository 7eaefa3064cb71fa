// Validation and dispatch of the adam ops (adam.h).
#include "kernels/adam.h"

#include "kernels/dispatch.h"

namespace tfm::ops {

namespace {

// The control vector of update_control, as adam_step reads it: beside
// tensor x (params or sums), x's dtype.
void require_control(const char* op, const TensorView& control, const TensorView& x,
                     const char* xname) {
  TFM_REQUIRE(control.dtype() == x.dtype() && control.shape() == Shape{kUpdateControlSize},
              "{}: control is {} but must be {} ({}), as {} is", op, control.str(),
              dtype_name(x.dtype()), kUpdateControlSize, xname);
}

}  // namespace

void adam_step(const TensorView& params, const TensorView& grads, const TensorView& m,
               const TensorView& v, const AdamOptions& o, const Stream& stream,
               const TensorView& control) {
  const char* op = "adam_step";
  require_device(op, stream, {{"params", &params}, {"grads", &grads}, {"m", &m}, {"v", &v}});
  if (!control.empty()) {
    require_device(op, stream, {{"control", &control}});
    require_control(op, control, params, "params");
  }
  TFM_REQUIRE(params.dtype() == DType::f32 || (params.device().is_cpu() && params.dtype() == DType::f64),
              "adam_step: params is {} but must be f32{}", dtype_name(params.dtype()),
              params.device().is_cpu() ? " (or f64 on the cpu)" : "");
  require_same(op, params, "params", grads, "grads");
  require_same(op, params, "params", m, "m");
  require_same(op, params, "params", v, "v");
  TFM_REQUIRE(o.step >= 1, "adam_step: step {} must be 1 or more (it is 1-based)", o.step);
  TFM_REQUIRE(o.beta1 >= 0.0f && o.beta1 < 1.0f && o.beta2 >= 0.0f && o.beta2 < 1.0f,
              "adam_step: beta1 = {} and beta2 = {} must be in [0, 1)", o.beta1, o.beta2);
  if (params.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> {
    impl::adam_step<D>(params, grads, m, v, o, control, stream);
  });
}

AdamSchedule adam_schedule(double lr, float beta1, float beta2, int64_t step) {
  TFM_REQUIRE(step >= 1, "adam_schedule: step {} must be 1 or more (it is 1-based)", step);
  const double t = static_cast<double>(step);
  return {lr, 1.0 - std::pow(static_cast<double>(beta1), t),
          1.0 - std::pow(static_cast<double>(beta2), t)};
}

void update_control(const TensorView& sums, double loss_scale, double max_norm,
                    const AdamSchedule& next, const AdamSchedule& retry, const TensorView& control,
                    const Stream& stream) {
  const char* op = "update_control";
  require_device(op, stream, {{"sums", &sums}, {"control", &control}});
  TFM_REQUIRE((sums.dtype() == DType::f32 || (sums.device().is_cpu() && sums.dtype() == DType::f64)) &&
                  sums.shape() == Shape{3},
              "{}: sums is {} but must be f32 (3){}", op, sums.str(),
              sums.device().is_cpu() ? " or f64 (3)" : "");
  require_control(op, control, sums, "sums");
  TFM_REQUIRE(loss_scale >= 1 && std::isfinite(loss_scale), "{}: loss scale {} must be finite and >= 1",
              op, loss_scale);
  on_device(stream, [&]<DeviceType D> {
    impl::update_control<D>(sums, loss_scale, max_norm, next, retry, control, stream);
  });
}

}  // namespace tfm::ops
