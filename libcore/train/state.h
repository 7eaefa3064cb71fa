// The training state a checkpoint carries so that a run resumes exactly
// (man/tfm.7, "TRAINING STATE"): counters, the data cursor, the loss
// scale, the dev-set record, the identity of the corpus, and the training
// options; and Adam's moments beside it.
//
// In a checkpoint the state is three optional sections:
//   training_state  this struct as "key = value" text (to_text)
//   adam.m, adam.v  Adam's moments: f32, little-endian, each tensor of the
//                   tensor table, in table order, at an element offset that
//                   rounds the end of the one before up to a multiple of 64;
//                   the gaps are zero. (The flat buffer in memory joins some
//                   tensors without gaps, ParamLayout; they map by name.)
// Dropout masks and the batch order are pure functions of (seed, counter)
// (libcore/base/rng.h), so the counters are the whole random state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "libcore/io/checkpoint.h"
#include "libcore/model/model_file.h"
#include "libcore/model/transformer.h"
#include "libcore/train/data.h"
#include "libcore/train/options.h"

namespace tfm::train {

inline constexpr int kTrainStateFormat = 1;
inline constexpr int64_t kMaxCorpora = 1 << 16;  // training corpora a state may name

struct TrainState {
  int64_t step = 0;            // updates applied
  int64_t micro_batches = 0;   // batches consumed: the dropout counter of the next one
  int64_t epoch = 1;           // 1-based epoch of the next batch
  int64_t cursor = 0;          // position of the next batch in this epoch's shuffled order
  double loss_scale = 1;       // fp16's dynamic loss scale
  int64_t loss_scale_streak = 0;
  double elapsed = 0;          // seconds of training, over every run so far
  int64_t tokens = 0;          // target tokens trained on
  int64_t bad_steps = 0;       // skipped for NaN/inf, in total
  int64_t consecutive_bad = 0;
  int64_t overflow_steps = 0;  // fp16 overflows, skipped
  std::optional<double> best_dev_nll;  // per token; none before the first validation
  int64_t best_step = 0;
  int64_t stale_validations = 0;       // since the best
  CorpusIdentity corpus;       // the (first) training corpus
  std::vector<CorpusIdentity> more_corpora;  // the training corpora after the first, in order
                                             // (their weights: options.weights)
  int64_t batches = 0;         // per epoch: as packed for this run, or with several corpora
                               // or weights, what an epoch draws (data.h, epoch_batches)
  int64_t ranks = 1;           // processes of the run that wrote it (an update takes
                               // ranks x update_freq batches of the global order)
  TrainOptions options;

  // Every training corpus, in order: corpus, then more_corpora.
  std::vector<CorpusIdentity> corpora() const;
  // The weight of each: options.weights, or 1 each when the state has none
  // (a checkpoint of a tfm before --weights).
  std::vector<double> weights() const;

  std::string to_text() const;
  // Throws Error naming `source` (and the line) for a state this tfm
  // cannot read.
  static TrainState parse(std::string_view text, std::string_view source);
  friend bool operator==(const TrainState&, const TrainState&) = default;
};

inline constexpr const char* kStateSection = "training_state";
inline constexpr const char* kAdamM = "adam.m";
inline constexpr const char* kAdamV = "adam.v";

// A checkpoint of `model` with its tokenizer, training state and Adam's
// moments (model.optimizer_state()), written atomically.
void save_checkpoint(const std::string& path, const Transformer& model,
                     const std::string& tokenizer, const TrainState& state);

// The training state of a checkpoint; Error when it has none ("a model
// without training state cannot be resumed").
TrainState read_state(const io::CheckpointReader& checkpoint);

// Loads a checkpoint's parameters and Adam's moments into `model`, whose
// configuration must be the checkpoint's.
void load_checkpoint(const ModelFile& checkpoint, Transformer& model);

}  // namespace tfm::train
