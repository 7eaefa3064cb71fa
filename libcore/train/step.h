// One training update, and evaluation on a dev corpus.
//
// An update runs forward and backward over `update_freq` batches into one
// gradient (accumulation), normalized by the target tokens of all of them,
// so two half batches give the gradient of the whole (up to rounding). The
// loss is multiplied by the loss scale before backward (fp16; 1 otherwise)
// and the gradient divided by it in the optimizer step, together with the
// clipping factor. A NaN or infinite loss or gradient norm skips the update:
// parameters and moments stay as they were.
//
// The host does not wait for an update (queue_update): whether it is
// applied and how much it is clipped are decided on the device from its
// sums (ops::update_control), and the sums reach the host later
// (read_update), while the next update already runs. A skipped update does
// not take an update number: the next one takes it again. When the host
// queues an update before it has read the previous one, it cannot know
// which number the update gets, so it gives both candidates (StepConfig's
// retry_*) and the device picks the one the previous outcome calls for:
// a run is the same update for update whether the host reads at once or
// one update late.
#pragma once

#include <cstdint>
#include <vector>

#include "libcore/model/transformer.h"
#include "libcore/train/optimizer.h"

namespace tfm::train {

class GradientReducer;  // data_parallel.h

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
  int64_t step = 1;           // 1-based update number (Adam's bias correction)
  double lr = 0;              // the schedule's rate at `step`
  // The number and rate the update takes instead when the update queued
  // before it, not read yet, turns out skipped (0: there is no such update).
  int64_t retry_step = 0;
  double retry_lr = 0;
  uint64_t seed = 1;          // of the dropout masks
  uint32_t rng_counter = 0;   // dropout counter of the first batch; batch i uses rng_counter + i
  // Data parallel (train/data_parallel.h): the target tokens of the whole
  // update, every rank's batches (0: this call's batches are the update).
  int64_t update_tokens = 0;
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

// An update queued on the model's stream: read it with read_update, before
// two more are queued.
struct QueuedUpdate {
  UpdateTicket ticket;
  double loss_scale = 1;  // the scale its loss was multiplied by
};

// Queues forward and backward over `batches`, the decision and Adam; the
// host does not wait. loss_scale: the scaler's current scale. With a
// reducer, `batches` are this rank's share of the update (maybe none), and
// the gradient and loss sums are summed over the ranks before the decision.
QueuedUpdate queue_update(Transformer& model, Adam& adam, const std::vector<HostBatch>& batches,
                          const StepConfig& config, double loss_scale,
                          GradientReducer* reducer = nullptr);
// Waits for a queued update's sums (that update alone), says what it did,
// and moves the loss scale on.
StepResult read_update(Transformer& model, const QueuedUpdate& update, LossScaler& scaler);
// Both at once: one update, read before returning.
StepResult train_step(Transformer& model, Adam& adam, const std::vector<HostBatch>& batches,
                      const StepConfig& config, LossScaler& scaler);

}  // namespace tfm::train
