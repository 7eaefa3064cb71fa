#include "libcore/train/step.h"

#include <cmath>

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

StepResult train_step(Transformer& model, Adam& adam, const std::vector<HostBatch>& batches,
                      const StepConfig& config, LossScaler& scaler) {
  TFM_REQUIRE(!batches.empty(), "an update needs at least one batch");
  int64_t tokens = 0;
  for (const HostBatch& b : batches) tokens += b.target_tokens;
  const double scale = scaler.scale();
  model.zero_grads();
  for (size_t i = 0; i < batches.size(); ++i) {
    TrainStep ts;
    ts.seed = config.seed;
    ts.rng_step = config.rng_counter + static_cast<uint32_t>(i);
    ts.grad_scale = static_cast<float>(scale / static_cast<double>(tokens));
    ts.tf32 = config.tf32;
    model.accumulate(batches[i], ts);
  }
  // The one point of the update where the host waits for the device: the
  // loss and the gradient norm decide clipping and whether to apply it.
  const UpdateSums u = model.finish_update();
  StepResult r;
  r.sums = u.sums;
  r.grad_norm = std::sqrt(u.grad_squares) / scale;
  const bool finite_loss = std::isfinite(r.sums.loss) && std::isfinite(r.sums.nll);
  if (!finite_loss || !std::isfinite(r.grad_norm)) {
    r.outcome = finite_loss && scaler.can_back_off() ? StepOutcome::overflow : StepOutcome::bad;
    scaler.update(r.outcome == StepOutcome::overflow);
    return r;
  }
  const float clip = clip_factor(r.grad_norm, config.clip_norm);
  adam.step(model.params(), model.grads(), config.lr, config.step,
            static_cast<float>(clip / scale), model.stream());
  scaler.update(false);
  return r;
}

}  // namespace tfm::train
