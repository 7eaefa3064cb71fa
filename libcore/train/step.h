// One training update, and evaluation on a dev corpus.
//
// An update runs forward and backward over `update_freq` batches into one
// gradient (accumulation), normalized by the target tokens of all of them,
// so two half batches give the gradient of the whole (up to rounding). The
// loss is multiplied by the loss scale before backward (fp16; 1 otherwise)
// and the gradient divided by it in the optimizer step, together with the
// clipping factor. A NaN or infinite loss or gradient norm skips the update:
// parameters and moments stay as they were.
#pragma once

#include <cstdint>
#include <vector>

#include "libcore/model/transformer.h"
#include "libcore/train/optimizer.h"

namespace tfm::train {

// Dynamic loss scaling (fp16): start at 2^16, halve on an overflow (down to
// 1), double after `interval` updates in a row without one. Static (every
// other precision): the scale stays 1 and nothing is an overflow.
class LossScaler {
 public:
  static constexpr double kInitial = 65536;
  static constexpr int64_t kInterval = 2000;

  explicit LossScaler(bool dynamic) : dynamic_(dynamic), scale_(dynamic ? kInitial : 1.0) {}

  bool dynamic() const { return dynamic_; }
  double scale() const { return scale_; }
  int64_t streak() const { return streak_; }  // clean updates since the last change
  // Whether a non-finite gradient can be an overflow the scale answers for.
  bool can_back_off() const { return dynamic_ && scale_ > 1; }
  void update(bool overflow);
  void restore(double scale, int64_t streak);  // from a checkpoint

 private:
  bool dynamic_;
  double scale_;
  int64_t streak_ = 0;
};

struct StepConfig {
  double lr = 0;              // this update's learning rate
  int64_t step = 1;           // 1-based update number (Adam's bias correction)
  uint64_t seed = 1;          // of the dropout masks
  uint32_t rng_counter = 0;   // dropout counter of the first batch; batch i uses rng_counter + i
  double clip_norm = 0;       // 0: no clipping
  bool tf32 = false;
};

enum class StepOutcome {
  applied,   // the parameters were updated
  bad,       // NaN or infinite loss or gradient: skipped
  overflow,  // fp16 gradient overflow: skipped, the loss scale halved
};

struct StepResult {
  LossSums sums;           // over every batch of the update
  double grad_norm = 0;    // of the unscaled, unclipped gradient of the mean token loss
  StepOutcome outcome = StepOutcome::applied;
};

StepResult train_step(Transformer& model, Adam& adam, const std::vector<HostBatch>& batches,
                      const StepConfig& config, LossScaler& scaler);

}  // namespace tfm::train
