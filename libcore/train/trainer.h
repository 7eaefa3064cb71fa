// tfm-train's work (cmd/tfm-train.cc is only its options): set up a run or
// resume one, train with the paper's recipe, validate, write checkpoints,
// report, and stop on a limit, a signal or a run of bad steps.
//
// Resuming is exact: the checkpoint carries every counter the run depends
// on (libcore/train/state.h), and batch order and dropout masks are pure
// functions of (seed, counter), so on the CPU an interrupted and resumed
// run gives the same losses and parameters, bit for bit, as one that was
// never interrupted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "libcore/train/options.h"

namespace tfm::train {

struct TrainRequest {
  std::vector<std::string> train;  // the training corpora (.tfmb), at least one; their weights:
                                   // overrides ("weights"), else the checkpoint's, else 1 each
  std::string dev;     // a dev corpus (.tfmb); empty: no validation
  std::string vocab;   // the SentencePiece model the corpora were made with; a
                       // checkpoint's embedded one serves when resuming
  std::string output;  // checkpoint directory; empty when resuming: the checkpoint's
  std::string resume;  // a checkpoint, or a directory's checkpoint_last.bin
  std::string init;    // fine-tune: a new run from this checkpoint's weights and
                       // architecture (setup.h); excludes `resume`
  std::string log;     // JSON lines, appended; empty: none
  std::string device = "auto";
  Overrides overrides; // --preset, the model knobs and the training options given
  bool quiet = false;  // -q
};

// The configuration file of the run `request` describes (--dump-config):
// the checkpoint's when resuming, with the options given on top; when
// fine-tuning, the checkpoint's model, the options given and "init".
std::string dump_config(const TrainRequest& request);

enum class StopReason { max_steps, max_epochs, max_time, early_stop, interrupted };

struct TrainResult {
  StopReason reason = StopReason::max_steps;
  int64_t step = 0;
  std::string checkpoint;  // the last one written (or resumed from)
};

// Runs to a limit, early stopping or a stop signal, and writes a last
// checkpoint. Throws Error for bad input, an unwritable checkpoint, or
// --max-bad-steps bad steps in a row (naming the last good checkpoint).
TrainResult train(const TrainRequest& request);

// SIGINT and SIGTERM ask train() to finish its step, write a checkpoint
// and return; a second one kills the process as usual.
void install_stop_signals();

}  // namespace tfm::train
