// The paper's optimizer (the paper's section "Training"): Adam (0.9, 0.98, 1e-9,
// or other settings, with AdamW's decay) over the flat parameter buffer, and
// gradient-norm clipping (the learning-rate schedules: schedule.h). Moments live in one buffer of the parameters'
// layout, so a step is one pass (ops::adam_step).
#pragma once

#include <cstdint>

#include "kernels/ops.h"
#include "libcore/base/tensor.h"
#include "libcore/train/schedule.h"

namespace tfm {

// The learning-rate schedules (noam_learning_rate, learning_rate): schedule.h.

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
