#include "libcore/train/step.h"

#include <cmath>

#include "libcore/base/phases.h"
#include "libcore/train/data_parallel.h"

namespace tfm::train {

void LossScaler::update(bool overflow) {
  if (!dynamic_) return;
  if (overflow) {
    scale_ = std::max(1.0, scale_ / 2);
    streak_ = 0;
  } else if (++streak_ >= kInterval) {
    scale_ *= 2;
    streak_ = 0;
  }
}

void LossScaler::restore(double scale, int64_t streak) {
  TFM_REQUIRE(std::isfinite(scale) && scale >= 1 && streak >= 0,
              "loss scale {} (after {} clean steps) is not a valid state", scale, streak);
  scale_ = dynamic_ ? scale : 1.0;
  streak_ = dynamic_ ? streak : 0;
}

QueuedUpdate queue_update(Transformer& model, Adam& adam, const std::vector<HostBatch>& batches,
                          const StepConfig& config, double loss_scale, GradientReducer* reducer) {
  TFM_REQUIRE(!batches.empty() || reducer, "an update needs at least one batch");
  int64_t tokens = config.update_tokens;
  if (tokens == 0)
    for (const HostBatch& b : batches) tokens += b.target_tokens;
  model.zero_grads();
  for (size_t i = 0; i < batches.size(); ++i) {
    TrainStep ts;
    ts.seed = config.seed;
    ts.rng_step = config.rng_counter + static_cast<uint32_t>(i);
    ts.grad_scale = static_cast<float>(loss_scale / static_cast<double>(tokens));
    ts.tf32 = config.tf32;
    if (i + 1 == batches.size()) ts.sink = reducer;  // its backward completes the gradient
    model.accumulate(batches[i], ts);
  }
  if (reducer) reducer->finish();
  model.finish_update();
  const ops::AdamSchedule next = adam.schedule(config.lr, config.step);
  const ops::AdamSchedule retry =
      config.retry_step > 0 ? adam.schedule(config.retry_lr, config.retry_step) : next;
  phases::mark(model.stream(), "Adam");
  ops::update_control(model.update_sums(), loss_scale, config.clip_norm, next, retry,
                      model.update_control(), model.stream());
  adam.step(model.params(), model.grads(), model.update_control(), model.stream());
  phases::mark(model.stream(), "send the update's sums");
  QueuedUpdate q{model.send_update(), loss_scale};
  q.ticket.tokens = tokens;
  return q;
}

StepResult read_update(Transformer& model, const QueuedUpdate& update, LossScaler& scaler) {
  const UpdateSums u = model.receive_update(update.ticket);
  StepResult r;
  r.sums = u.sums;
  r.grad_norm = std::sqrt(u.grad_squares) / update.loss_scale;
  if (u.applied) {
    scaler.update(false);
    return r;
  }
  // Skipped on the device (ops::update_control): an fp16 overflow the scale
  // answers for, or a NaN or infinite loss or gradient.
  const bool finite_loss = std::isfinite(r.sums.loss) && std::isfinite(r.sums.nll);
  r.outcome = finite_loss && scaler.can_back_off() ? StepOutcome::overflow : StepOutcome::bad;
  scaler.update(r.outcome == StepOutcome::overflow);
  return r;
}

StepResult train_step(Transformer& model, Adam& adam, const std::vector<HostBatch>& batches,
                      const StepConfig& config, LossScaler& scaler) {
  return read_update(model, queue_update(model, adam, batches, config, scaler.scale()), scaler);
}

}  // namespace tfm::train
