// The loop of tfm-train: it reads the run set_up() described (setup.h),
// queues updates, stops, validates and saves; what it reports goes through
// the Reporter (report.h), and the ranks of a data-parallel run agree
// through ranks.h.
#include "libcore/train/trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <memory>
#include <optional>
#include <vector>

#include "libcore/base/error.h"
#include "libcore/base/log.h"
#include "libcore/dist/comm.h"
#include "libcore/train/data_parallel.h"
#include "libcore/train/ranks.h"
#include "libcore/train/report.h"
#include "libcore/train/setup.h"

namespace tfm::train {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_stop_signal{0};

extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig); }

class Trainer {
 public:
  explicit Trainer(const TrainRequest& request)
      : req_(request), comm_(dist::Comm::world()), report_(run_, request.quiet || !speaks(comm_)) {
    if (comm_.rank() > 0) {
      log::set_program(fmt::format("tfm-train (rank {})", comm_.rank()));
      log::set_level(log::Level::error);  // rank 0 says what every rank would
    }
  }

  TrainResult run() {
    set_up_ranks();
    try {
      return loop();
    } catch (const Error& e) {
      // A rank that fails alone stops the others at once, not at their timeout.
      if (!comm_.distributed()) throw;
      comm_.abort(e.where().empty() ? e.what() : fmt::format("{} ({})", e.what(), e.where()));
    }
  }

 private:
  // Several processes (data_parallel.h) start only when they agree on the
  // run they set up (ranks.h), and sum their gradients from then on.
  void set_up_ranks() {
    if (!comm_.distributed()) return set_up_here();
    comm_.set_timeout(with_overrides(TrainOptions{}, req_.overrides).dist_timeout);
    agree_on_setup(comm_, [&] {
      set_up_here();
      return agreement_text(run_);
    });
    comm_.set_timeout(run_.options.dist_timeout);
    reducer_ = std::make_unique<GradientReducer>(comm_, *run_.model,
                                                 static_cast<size_t>(run_.options.bucket_mb) << 20);
  }

  void set_up_here() {
    run_ = set_up(req_, comm_);
    saved_step_ = run_.resumed() ? run_.state.step : -1;
    last_checkpoint_ = run_.resume_path;
    order_ = epoch_order_of(run_.state.epoch);
    report_.describe(comm_.size(), order_);
  }

  // ------------------------------------------------------------------ loop
  // The host queues update n + 1 before it reads update n's sums, so the
  // device never waits for it (train/step.h). It reads first, and so runs
  // an update behind no longer, when what follows update n needs its
  // parameters or its outcome: a validation, a checkpoint, the last update,
  // or the fp16 loss scale of the next one.
  struct InFlight {
    QueuedUpdate update;
    StepConfig config;
    int64_t epoch;  // of the update's batches (the state's may be past it when it is read)
  };

  TrainResult loop() {
    report_.start();
    last_save_ = Clock::now();
    std::optional<StopReason> stop;
    std::optional<InFlight> flight;
    while (true) {
      if (flight && must_read_first()) {
        stop = finish(*flight, /*current=*/true);
        flight.reset();
        if (stop) break;
      }
      stop = stop_before_update(flight.has_value());
      if (comm_.distributed()) stop = agreed_stop(comm_, queued_, stop);
      if (stop) break;
      std::optional<InFlight> queued = queue_next(flight.has_value());
      if (!queued) {
        stop = StopReason::max_epochs;
        break;
      }
      if (flight) stop = finish(*flight, /*current=*/false);
      flight = queued;
      if (stop) break;
    }
    if (flight) {  // the last update queued: read it, and what follows it runs
      const std::optional<StopReason> last = finish(*flight, /*current=*/true);
      if (last) stop = last;
    }
    report_.end_live();
    if (run_.state.step != saved_step_ || last_checkpoint_.empty()) save("end");
    // Rank 0 tells the run's end; the other ranks have nothing to say.
    if (speaks(comm_)) report_.stopped(*stop, g_stop_signal.load(), last_checkpoint_);
    return {*stop, run_.state.step, last_checkpoint_};
  }

  // Queues the next update: its batches in the global order, of which this
  // rank trains on its share; none after the last epoch (--max-epochs).
  // one_unread: an update is queued and not read.
  std::optional<InFlight> queue_next(bool one_unread) {
    TrainState& st = run_.state;
    std::vector<BatchRef> ids;
    while (static_cast<int64_t>(ids.size()) < comm_.size() * run_.options.update_freq &&
           next_batch(ids)) {}
    if (ids.empty()) return std::nullopt;
    const Share share = share_of(ids.size(), comm_.rank(), comm_.size(), run_.options.update_freq);
    batches_.clear();
    for (size_t i = share.first; i < share.first + share.count; ++i)
      batches_.push_back(run_.train->batch(ids[i]));
    StepConfig sc = step_config(one_unread);
    sc.rng_counter += static_cast<uint32_t>(share.first);
    for (const BatchRef id : ids) sc.update_tokens += run_.train->target_tokens(id);
    const QueuedUpdate queued =
        queue_update(*run_.model, *run_.adam, batches_, sc, run_.scaler.scale(), reducer_.get());
    st.micro_batches += static_cast<int64_t>(ids.size());
    ++queued_;
    return InFlight{queued, sc, st.epoch};
  }

  // The next update's number and rate: one past the updates read, or, with
  // one still unread, one past it too, unless it is skipped (the retry).
  StepConfig step_config(bool one_unread) const {
    const TrainOptions& opt = run_.options;
    StepConfig sc;
    const ScheduleConfig schedule = opt.schedule(run_.config.d_model);
    const auto lr = [&](int64_t step) { return learning_rate(schedule, step); };
    sc.step = run_.state.step + (one_unread ? 2 : 1);
    sc.lr = lr(sc.step);
    if (one_unread) {
      sc.retry_step = run_.state.step + 1;
      sc.retry_lr = lr(sc.retry_step);
    }
    sc.seed = opt.seed;
    sc.rng_counter = static_cast<uint32_t>(run_.state.micro_batches);
    sc.clip_norm = opt.clip_norm;
    sc.tf32 = run_.precision == Precision::tf32;
    return sc;
  }

  // Whether the update in flight must be read before the next is queued:
  // if it is applied, it is update state.step + 1, and what happens after
  // that update must see its parameters (not the next update's), or the
  // next update needs its fp16 outcome.
  bool must_read_first() const {
    const TrainOptions& opt = run_.options;
    const int64_t n = run_.state.step + 1;
    return run_.scaler.dynamic() || (run_.dev && n % opt.valid_every == 0) ||
           (opt.save_every_steps > 0 && n % opt.save_every_steps == 0) ||
           (opt.max_steps > 0 && n >= opt.max_steps) || save_due_by_time();
  }

  bool save_due_by_time() const {
    return speaks(comm_) && run_.options.save_every > 0 &&
           std::chrono::duration<double>(Clock::now() - last_save_).count() >= run_.options.save_every;
  }

  // Reads an update and does what follows it. current: no later update has
  // been queued, so the parameters are this update's and a validation or a
  // checkpoint may run (must_read_first() made sure that those tied to an
  // update number only fall on current updates).
  std::optional<StopReason> finish(const InFlight& f, bool current) {
    TrainState& st = run_.state;
    if (reducer_ && reducer_->on_gpu())
      comm_.wait_until([&] { return run_.model->update_arrived(f.update.ticket); }, "an update's sums",
                       [&] { return reducer_->health(); });
    const StepResult r = read_update(*run_.model, f.update, run_.scaler);
    st.loss_scale = run_.scaler.scale();
    st.loss_scale_streak = run_.scaler.streak();
    if (r.outcome != StepOutcome::applied) {
      skipped(r, st.step + 1);
      return std::nullopt;
    }
    ++st.step;
    st.consecutive_bad = 0;
    st.tokens += r.sums.tokens;
    report_.applied(r, st.step == f.config.step ? f.config.lr : f.config.retry_lr, f.epoch);
    if (!current) return std::nullopt;
    const TrainOptions& opt = run_.options;
    std::optional<StopReason> stop;
    if (run_.dev && st.step % opt.valid_every == 0 && validate()) stop = StopReason::early_stop;
    const bool by_steps = opt.save_every_steps > 0 && st.step % opt.save_every_steps == 0;
    if (by_steps || save_due_by_time()) save(by_steps ? "every-steps" : "every-time");
    return stop;
  }

  // one_unread: an update is queued and not read (it cannot reach
  // --max-steps: must_read_first() reads that one at once).
  std::optional<StopReason> stop_before_update(bool one_unread) const {
    const TrainOptions& opt = run_.options;
    const TrainState& st = run_.state;
    if (g_stop_signal.load() != 0) return StopReason::interrupted;
    if (opt.max_steps > 0 && st.step + (one_unread ? 1 : 0) >= opt.max_steps)
      return StopReason::max_steps;
    if (opt.max_time > 0 && report_.elapsed() >= opt.max_time) return StopReason::max_time;
    if (opt.max_epochs > 0 && st.epoch >= opt.max_epochs &&
        st.cursor >= static_cast<int64_t>(order_.size()))
      return StopReason::max_epochs;
    return std::nullopt;
  }

  // The next batch of the shuffled order, starting the next epoch at the
  // end of one; false after the last epoch (--max-epochs).
  bool next_batch(std::vector<BatchRef>& out) {
    TrainState& st = run_.state;
    if (st.cursor >= static_cast<int64_t>(order_.size())) {
      if (run_.options.max_epochs > 0 && st.epoch >= run_.options.max_epochs) return false;
      ++st.epoch;
      st.cursor = 0;
      order_ = epoch_order_of(st.epoch);
      report_.epoch(st.epoch, order_);
    }
    out.push_back(order_[static_cast<size_t>(st.cursor++)]);
    return true;
  }

  // The batches of every corpus in epoch `epoch`, shuffled (data.h): for
  // one corpus of weight 1, epoch_order's.
  std::vector<BatchRef> epoch_order_of(int64_t epoch) const {
    return mixed_epoch_order(run_.train->sizes(), run_.options.weights, run_.options.seed, epoch);
  }

  // An update not applied; `step` is the number it would have had. An fp16
  // overflow is the loss scale's business; a run of NaN or infinite
  // updates stops the run (--max-bad-steps).
  void skipped(const StepResult& r, int64_t step) {
    TrainState& st = run_.state;
    report_.skipped(r, step);
    if (r.outcome == StepOutcome::overflow) {
      ++st.overflow_steps;
      log::debug("update {}: fp16 gradient overflow, skipped; loss scale now {}", step,
                 run_.scaler.scale());
      return;
    }
    ++st.bad_steps;
    ++st.consecutive_bad;
    report_.end_live();
    log::warn("update {} skipped: the loss or the gradient is NaN or infinite (loss {}, gradient "
              "norm {}); {} in a row",
              step, r.sums.loss / std::max<double>(1, static_cast<double>(r.sums.tokens)),
              r.grad_norm, st.consecutive_bad);
    if (st.consecutive_bad >= run_.options.max_bad_steps)
      fail("stopped after {} updates in a row with a NaN or infinite loss or gradient (lower "
           "--lr-scale, or set --clip-norm); {}",
           st.consecutive_bad,
           last_checkpoint_.empty() ? "no checkpoint was written"
                                    : fmt::format("the last good checkpoint is {}", last_checkpoint_));
  }

  // Dev loss and perplexity; keeps the best checkpoint. True when early
  // stopping says to stop.
  bool validate() {
    TrainState& st = run_.state;
    const LossSums sum = dev_sums();
    const double nll = sum.nll / static_cast<double>(std::max<int64_t>(1, sum.tokens));
    const bool better = !st.best_dev_nll || nll < *st.best_dev_nll;
    if (better) {
      st.best_dev_nll = nll;
      st.best_step = st.step;
      st.stale_validations = 0;
    } else {
      ++st.stale_validations;
    }
    report_.validated(sum, better);
    if (better && speaks(comm_)) {
      write_checkpoint(run_.dir->best(), "best");
      run_.best_checkpoint = run_.dir->best();
    }
    return run_.options.early_stop > 0 && st.stale_validations >= run_.options.early_stop;
  }

  // The dev corpus's sums: rank r of K evaluates batches r, r + K, ...,
  // and the sums are the ranks'.
  LossSums dev_sums() {
    LossSums sum;
    const BatchSource& dev = *run_.dev;
    for (size_t i = static_cast<size_t>(comm_.rank()); i < dev.size(); i += static_cast<size_t>(comm_.size())) {
      const LossSums s = run_.model->evaluate(dev.batch(i));
      sum.loss += s.loss;
      sum.nll += s.nll;
      sum.tokens += s.tokens;
    }
    if (comm_.distributed()) {
      double sums[] = {sum.loss, sum.nll, static_cast<double>(sum.tokens)};
      comm_.all_reduce_sum(sums, "the dev sums");
      sum = {sums[0], sums[1], static_cast<int64_t>(sums[2])};
    }
    return sum;
  }

  // Writes `file` (`path` unless given), logged as `path`.
  void write_checkpoint(const std::string& path, const char* why, const std::string& file = {}) {
    run_.state.elapsed = report_.elapsed();
    save_checkpoint(file.empty() ? path : file, *run_.model, run_.tokenizer, run_.state);
    report_.checkpoint(path, why);
  }

  void save(const char* why) {
    const int64_t step = run_.state.step;
    if (!speaks(comm_)) {  // rank 0 writes the run's checkpoints
      saved_step_ = step;
      return;
    }
    // checkpoint_last.bin first, then its numbered name (checkpoint_dir.h):
    // a kill between the two never leaves a numbered checkpoint newer than it.
    const std::string path = run_.dir->numbered(step);
    write_checkpoint(path, why, run_.dir->last());
    run_.dir->commit(step, run_.options.keep_last);
    saved_step_ = step;
    last_checkpoint_ = path;
    last_save_ = Clock::now();
    log::debug("update {}: checkpoint {} ({})", step, path, why);
  }

  TrainRequest req_;
  dist::Comm& comm_;
  Run run_;           // set_up()'s, then the loop's: its state moves with every update
  Reporter report_;   // reads run_
  std::unique_ptr<GradientReducer> reducer_;  // several ranks only
  int64_t queued_ = 0;  // updates queued in this run (the ranks' common count)
  std::vector<BatchRef> order_;  // the shuffled batches of the state's epoch
  std::vector<HostBatch> batches_;  // this rank's share of the update being queued
  Clock::time_point last_save_;
  int64_t saved_step_ = -1;
  std::string last_checkpoint_;  // the last one written, or the one resumed
};

}  // namespace

TrainResult train(const TrainRequest& request) { return Trainer(request).run(); }

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESETHAND;  // a second signal acts as usual
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace tfm::train
