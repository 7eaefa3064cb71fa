// The paper's optimizer (the paper's section "Training"): Adam (0.9, 0.98, 1e-9) over
// the flat parameter buffer, the warm-up / inverse-square-root schedule, and
// gradient-norm clipping. Moments live in one buffer of the parameters'
// layout, so a step is one pass (ops::adam_step).
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/ops.h"
#include "libcore/base/tensor.h"

namespace tfm {

// lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), step >= 1.
double noam_learning_rate(int64_t step, int64_t d_model, int64_t warmup, double scale = 1.0);

// The learning-rate schedules of tfm-train --lr-schedule, at update `step`
// (1-based), W = warmup, D = decay_steps:
//   noam          the paper's (above), times scale; lr is not read
//   inverse-sqrt  fairseq's: lr step / W while step < W, then lr sqrt(W / step)
//   linear        lr step / W while step < W, then down in a line to min_lr at
//                 step D, and min_lr after
//   cosine        lr step / W while step < W, then min_lr + (lr - min_lr)
//                 (1 + cos(pi (step - W) / (D - W))) / 2, and min_lr after D
//   constant      lr step / W while step < W, then lr
// (the warm-up of the last four: 0 to lr in a line, PyTorch's LinearLR from
// 1 / W; their decays as PyTorch's LinearLR and CosineAnnealingLR give them.)
enum class LrSchedule { noam, inverse_sqrt, linear, cosine, constant };
LrSchedule parse_lr_schedule(std::string_view name);  // noam, inverse-sqrt, linear, cosine, constant
std::string_view lr_schedule_name(LrSchedule s);
struct ScheduleConfig {
  LrSchedule kind = LrSchedule::noam;
  int64_t d_model = 512, warmup = 4000, decay_steps = 0;  // decay_steps: linear and cosine, > warmup
  double scale = 1.0;       // noam
  double lr = 0, min_lr = 0;  // the others: the peak and the floor
};
double learning_rate(const ScheduleConfig& schedule, int64_t step);

// ||grads||_2 over the whole buffer (one reduction, read back to the host).
double gradient_norm(const TensorView& grads, const Stream& stream);

// The factor that brings a gradient of norm `norm` down to `max_norm`
// (1 when it is already within it, or when max_norm <= 0: no clipping):
// the op layer's rule, which update_control applies on the device.
using ops::clip_factor;

struct AdamConfig {
  float beta1 = 0.9f, beta2 = 0.98f, eps = 1e-9f;  // the paper's
  float weight_decay = 0;                           // decoupled (AdamW); kernels/adam.h
};

class Adam {
 public:
  // Moments for a flat buffer of `shape`, zeroed on the stream's device in
  // its order (the stream the updates will run on).
  Adam(Shape shape, DType dtype, const Stream& stream, AdamConfig config = {});
  // Over moment buffers planned elsewhere (Transformer::optimizer_state()).
  Adam(TensorView m, TensorView v, AdamConfig config = {});

  // One update of `params` from `grads` at `step` (1-based) with `lr`;
  // gradients are multiplied by grad_scale first (clipping, loss scaling).
  void step(const TensorView& params, const TensorView& grads, double lr, int64_t step,
            float grad_scale, const Stream& stream);
  // One update as ops::update_control decided it on the device (`control`):
  // its gradient scale, schedule, and whether it is applied at all.
  void step(const TensorView& params, const TensorView& grads, const TensorView& control,
            const Stream& stream);
  // The learning rate and bias corrections of update number `step` (1-based).
  ops::AdamSchedule schedule(double lr, int64_t step) const;

  const TensorView& m() const { return m_; }
  const TensorView& v() const { return v_; }

 private:
  AdamConfig config_;
  Tensor owned_m_, owned_v_;  // empty when the moments are planned elsewhere
  TensorView m_, v_;
};

}  // namespace tfm
