#include "libcore/train/schedule.h"

#include <algorithm>
#include <cmath>

#include "libcore/base/error.h"

namespace tfm {

double noam_learning_rate(int64_t step, int64_t d_model, int64_t warmup, double scale) {
  TFM_REQUIRE(step >= 1 && d_model >= 1 && warmup >= 1,
              "learning rate: step, d_model and warmup must be positive (got {}, {}, {})", step,
              d_model, warmup);
  const double s = static_cast<double>(step), w = static_cast<double>(warmup);
  return scale * std::pow(static_cast<double>(d_model), -0.5) * std::min(std::pow(s, -0.5), s * std::pow(w, -1.5));
}

LrSchedule parse_lr_schedule(std::string_view name) {
  for (LrSchedule s : {LrSchedule::noam, LrSchedule::inverse_sqrt, LrSchedule::linear, LrSchedule::cosine,
                       LrSchedule::constant})
    if (name == lr_schedule_name(s)) return s;
  fail("unknown learning-rate schedule '{}' (known: noam, inverse-sqrt, linear, cosine, constant)", name);
}

std::string_view lr_schedule_name(LrSchedule s) {
  switch (s) {
    case LrSchedule::noam: return "noam";
    case LrSchedule::inverse_sqrt: return "inverse-sqrt";
    case LrSchedule::linear: return "linear";
    case LrSchedule::cosine: return "cosine";
    case LrSchedule::constant: return "constant";
  }
  return "?";
}

double learning_rate(const ScheduleConfig& c, int64_t step) {
  if (c.kind == LrSchedule::noam) return noam_learning_rate(step, c.d_model, c.warmup, c.scale);
  TFM_REQUIRE(step >= 1 && c.warmup >= 1, "learning rate: step and warmup must be positive (got {}, {})", step,
              c.warmup);
  const double s = static_cast<double>(step), w = static_cast<double>(c.warmup);
  if (step < c.warmup) return c.lr * s / w;
  const double decay = static_cast<double>(c.decay_steps);
  switch (c.kind) {
    case LrSchedule::inverse_sqrt:
      return c.lr * std::sqrt(w / s);
    case LrSchedule::linear:
    case LrSchedule::cosine: {
      TFM_REQUIRE(c.decay_steps > c.warmup, "the {} schedule decays over {} steps, not past its {} of warm-up",
                  lr_schedule_name(c.kind), c.decay_steps, c.warmup);
      if (step >= c.decay_steps) return c.min_lr;
      const double p = (s - w) / (decay - w);
      return c.kind == LrSchedule::linear ? c.lr + (c.min_lr - c.lr) * p
                                          : c.min_lr + (c.lr - c.min_lr) * (1 + std::cos(M_PI * p)) / 2;
    }
    default:
      return c.lr;
  }
}

}  // namespace tfm
