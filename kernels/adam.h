// The optimizer: Adam, its schedule, and the decision of an update.
// Part of the op catalogue: kernels/ops.h gives the contract every op keeps.
#pragma once

#include <cmath>

#include "libcore/base/rng.h"
#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"

namespace tfm::ops {

// --------------------------------------------------------- adam: the optimizer

struct AdamOptions {
  float lr = 0;
  float beta1 = 0.9f, beta2 = 0.98f, eps = 1e-9f;  // the paper's
  float weight_decay = 0;    // decoupled (AdamW, Loshchilov and Hutter 2019); the paper's is 0
  int64_t step = 1;          // 1-based, for bias correction
  float grad_scale = 1.0f;   // multiplies every gradient first (clipping, loss scale)
};

// One pass over the flat buffers (P), in place:
//   g = grad_scale * grads;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   params *= 1 - lr * weight_decay                       (only when weight_decay != 0)
//   params -= lr * (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps)
// (PyTorch's AdamW order: the decay first, with the update's learning rate.)
// params, grads, m, v: f32 (f64 on the CPU for tests), one shape.
// control: update_control's decision, on the device (optional: an empty
// view). When given, its grad_scale, lr and bias corrections replace the
// options' (their lr, step and grad_scale are not read), and an update it
// does not apply leaves params, m and v as they were.
void adam_step(const TensorView& params, const TensorView& grads, const TensorView& m,
               const TensorView& v, const AdamOptions& options, const Stream& stream,
               const TensorView& control = {});

// What the schedule gives one update number: the learning rate and Adam's
// bias corrections 1 - beta^step, in double (adam_step rounds them to its
// dtype once, as it does with the values it computes from AdamOptions).
struct AdamSchedule {
  double lr = 0, bias1 = 1, bias2 = 1;
};
AdamSchedule adam_schedule(double lr, float beta1, float beta2, int64_t step);

// The clipping rule, one for host and device: the factor that brings a
// gradient of norm `norm` down to `max_norm` (1 when it is within it, or
// when max_norm <= 0: no clipping), computed in double, rounded to float.
TFM_HD float clip_factor(double norm, double max_norm) {
  if (max_norm <= 0 || !(norm > max_norm)) return 1.0f;
  return static_cast<float>(max_norm / (norm + 1e-6));
}

// An update's decision, made where its sums are, so the host can queue the
// optimizer step (and the next update) without reading them:
//   sums (3) = {loss, nll, sum of the gradient's squares}: f32 (f64 for f64)
//   norm = sqrt(sum) / loss_scale                     (the gradient's own norm)
//   applied = loss, nll and norm are all finite
//   grad_scale = clip_factor(norm, max_norm) / loss_scale
//   schedule = control[0] as found (1: the update before was applied) ? next : retry
// control (5) = {applied, grad_scale, schedule.lr, schedule.bias1,
// schedule.bias2}, of the sums' dtype, all in double and rounded once, as
// the host would. The
// two schedules let an update take its number from an outcome the host has
// not read yet (libcore/train/step.h).
void update_control(const TensorView& sums, double loss_scale, double max_norm,
                    const AdamSchedule& next, const AdamSchedule& retry,
                    const TensorView& control, const Stream& stream);
inline constexpr int64_t kUpdateControlSize = 5;

}  // namespace tfm::ops

// The devices' implementations, declared once for both: adam.cc calls
// impl::OP<D> through on_device once a call is valid; cpu/adam.cc and
// cuda/adam.cu define the specializations. Not for callers.
namespace tfm::ops::impl {

// update_control's arithmetic, one copy for both devices: the decision
// from the sums as doubles. TFM_HD: host and device.
struct UpdateDecision {
  float applied, grad_scale;
};
TFM_HD UpdateDecision decide_update(double loss, double nll, double squares, double loss_scale,
                                    double max_norm) {
  const double norm = std::sqrt(squares) / loss_scale;
  const bool finite = std::isfinite(loss) && std::isfinite(nll) && std::isfinite(norm);
  if (!finite) return {0.0f, 0.0f};
  return {1.0f, static_cast<float>(static_cast<double>(clip_factor(norm, max_norm)) / loss_scale)};
}

template <DeviceType D>
void adam_step(const TensorView& params, const TensorView& grads, const TensorView& m,
               const TensorView& v, const AdamOptions& options, const TensorView& control,
               const Stream& stream);
template <DeviceType D>
void update_control(const TensorView& sums, double loss_scale, double max_norm,
                    const AdamSchedule& next, const AdamSchedule& retry, const TensorView& control,
                    const Stream& stream);

}  // namespace tfm::ops::impl
