// What tfm-train reports of a run (progress.h says where it goes): the
// lines that say what the run is, the progress line after every update
// with its ETA, the dev results, the line that ends the run, and the --log
// records, one JSON object an event: start, epoch, train, skip, valid,
// checkpoint, stop. Every number reported is read from the Run
// (setup.h) as the loop (trainer.cc) left it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "libcore/base/progress.h"
#include "libcore/train/setup.h"
#include "libcore/train/trainer.h"

namespace tfm::train {

class Reporter {
 public:
  // `run`: read at every report, so it may be set up after this. quiet: -q,
  // or a rank that does not speak for the run. Error for a bad
  // TFM_PROGRESS_INTERVAL.
  Reporter(const Run& run, bool quiet);

  // The model, its memory, the corpora and the checkpoint resumed, what
  // the epoch the run starts in draws (`order`, its shuffled batches), and
  // the "start" record (with "corpora", as an "epoch" record has them);
  // `ranks`: the processes of this run.
  void describe(int ranks, const std::vector<BatchRef>& order);
  // An epoch begins: what it draws from each training corpus (`order`),
  // as a line and an "epoch" record.
  void epoch(int64_t epoch, const std::vector<BatchRef>& order);
  // The run's clock starts; elapsed() goes on from the resumed runs' time.
  void start();
  // Seconds of training over every run so far.
  double elapsed() const;

  // An update applied (run.state.step is its number): the live line after
  // every one; a line and a "train" record every --log-every updates,
  // over the updates since the last one. `epoch`: the update's own (the
  // next one may have begun another when this is read).
  void applied(const StepResult& r, double lr, int64_t epoch);
  // An update not applied; `step` is the number it would have had.
  void skipped(const StepResult& r, int64_t step);
  // A validation's sums, run.state's record already updated by them.
  void validated(const LossSums& sums, bool better);
  // A checkpoint written as `path` for the reason `why`.
  void checkpoint(const std::string& path, const char* why);
  // The run's last line (interrupted by `signal`, 0 when unknown) and the
  // "stop" record.
  void stopped(StopReason reason, int signal, const std::string& last_checkpoint);

  // Erases the live line, so that what follows starts on a clean line.
  void end_live() { progress_.end_live(); }

 private:
  using Clock = std::chrono::steady_clock;

  // What a window of updates between two reports adds up to.
  struct Window {
    double loss = 0, nll = 0, grad_norm = 0;
    int64_t tokens = 0, updates = 0;
    Clock::time_point start = Clock::now();
  };

  void report(double lr, int64_t epoch);
  double eta() const;
  size_t memory_bytes() const;
  std::string best_text() const;
  std::string skipped_text() const;
  void log(const JsonWriter& record);
  // The line "epoch E: CORPUS N pairs (M batches), ..." of `order`, and
  // the record's "corpora" member (the path, weight, pairs and batches of
  // each) added to `record`.
  std::string drawn(int64_t epoch, const std::vector<BatchRef>& order, JsonWriter& record) const;

  const Run& run_;
  Progress progress_;
  Window window_;
  Clock::time_point start_ = Clock::now();
  double elapsed_base_ = 0;  // the resumed runs' seconds
  int64_t updates_ = 0;      // applied in this run
};

}  // namespace tfm::train
