// tfm-train's setup (libcore/train/trainer.h): everything a run needs
// before its first update, resolved and checked here, so that the loop
// (trainer.cc) reads a finished description and checks nothing.
//
// A fine-tuned run (--init) is a new run whose parameters and architecture
// are a checkpoint's: Adam's moments zero, update 0, a new schedule and
// data order; the model options given may change only what shapes
// training (options.h, fine_tuned_model).
//
// The checks run in this order, so a run with several faults names the
// first: the checkpoint fine-tuned (as a model, the model options given),
// the checkpoint resumed (as a model, its training state, the model
// options given), the training corpora against the checkpoint's
// --max-tokens, the training corpora against each other (one vocabulary),
// the vocabulary (--vocab, or the checkpoint's embedded one) against every
// corpus, the model's vocabulary size, the corpora and weights the
// checkpoint trained on, the batches an epoch draws, the device and the precision, the model's
// positions and memory, the checkpoint directory, the log.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "libcore/base/device.h"
#include "libcore/dist/comm.h"
#include "libcore/model/config.h"
#include "libcore/train/checkpoint_dir.h"
#include "libcore/train/data.h"
#include "libcore/train/optimizer.h"
#include "libcore/train/options.h"
#include "libcore/train/progress.h"
#include "libcore/train/state.h"
#include "libcore/train/step.h"
#include "libcore/train/trainer.h"

namespace tfm::train {

// A run as set up: a new one, or the one a checkpoint continues.
struct Run {
  std::string resume_path;  // the checkpoint resumed; empty for a new run
  std::string init_path;    // a new run's: the checkpoint it fine-tunes (--init); empty: none
  TrainOptions options;     // the checkpoint's (or the defaults) with the given ones on top;
                            // max_tokens and weights (one per corpus) made explicit
  ModelConfig config;
  std::string vocab_fingerprint;  // of the vocabulary every corpus comes from
  std::string tokenizer;          // the SentencePiece model every checkpoint embeds
  std::unique_ptr<TrainCorpora> train;  // the training corpora; their weights: options.weights
  std::unique_ptr<BatchSource> dev;     // null without a dev corpus
  Device device;
  Precision precision = Precision::fp32;  // --precision as resolved on `device`
  std::unique_ptr<Transformer> model;     // initialized, or the checkpoint's (resumed or
                                          // fine-tuned) parameters
  std::unique_ptr<Adam> adam;             // moments zero unless resumed
  LossScaler scaler{false};
  std::unique_ptr<CheckpointDir> dir;  // locked; rank 0's alone (it writes the checkpoints)
  std::unique_ptr<JsonLog> log;        // --log; rank 0's alone
  TrainState state;                    // the checkpoint's, or a new run's
  int64_t resumed_ranks = 1;           // the ranks of the run resumed
  std::string best_checkpoint;  // the best dev perplexity's checkpoint, or "" when none is kept

  bool resumed() const { return !resume_path.empty(); }
};

// Sets up the run `request` asks for on this rank of `comm`; Error for
// anything that stops it from starting.
Run set_up(const TrainRequest& request, const dist::Comm& comm);

// The options a run trains with: `base` (the defaults, or a checkpoint's)
// with the training options given on top.
TrainOptions with_overrides(TrainOptions base, const Overrides& overrides);

}  // namespace tfm::train
