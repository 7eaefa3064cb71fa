// tfm-train's learning-rate schedules: the paper's and the four that
// fairseq and PyTorch users run (tfm-train --lr-schedule). Apart from the
// optimizer (optimizer.h) so that the training options (options.h) and
// what reads them need none of the op layer.
#pragma once

#include <cstdint>
#include <string_view>

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

}  // namespace tfm
