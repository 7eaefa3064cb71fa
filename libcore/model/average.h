// Checkpoint averaging (tfm-avgckpt, the paper: "the last 5 checkpoints"):
// the element-wise mean of the tensors of several checkpoints of one model.
//
// Contracts:
// - The inputs agree on their configuration text, their tokenizer bytes and
//   their tensor table (names, dtypes, shapes; the order may differ), else
//   one Error names the file, and the tensor or the configuration line.
// - Streaming: the inputs are read one after the other, piece by piece, into
//   one float64 accumulator (8 bytes a parameter: two f32 models), whatever
//   their number; the mean is rounded in place and written from there.
// - Exact: each element is summed in float64 and rounded once, so k copies
//   of one checkpoint (k < 2^29) average to it bit for bit, -0 included (the
//   sum starts from the first input's values, not from +0). f64 tensors
//   (tests) keep a running mean, exact for equal values too.
// - The output holds the configuration, the tokenizer and the means, in the
//   first input's table order; the optional sections (training state, Adam's
//   moments) are dropped, or with keep_state copied from the newest input.
// - Writing is atomic (checkpoint.h): on any error no output file is left.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "libcore/io/checkpoint.h"

namespace tfm {

class Progress;

// The section in which tfm-train stores its state as "key = value" text
// (train::TrainState); its "step" line is the number of updates applied.
inline constexpr const char* kTrainingStateSection = "training_state";

// A checkpoint's training step: the "step" of its training state, else the
// STEP of a file named checkpoint_<STEP>.bin (as tfm-train names them), else
// none. Error for a training state without a readable step.
std::optional<int64_t> checkpoint_step(const std::string& path);

// The newest `n` checkpoints of `dir` by training step, oldest first. Every
// regular file that starts with the checkpoint magic counts, except those
// without a step; files of one step (checkpoint_last.bin and checkpoint_best.bin
// beside the numbered one) count once, by the numbered name when there is
// one. Temporary files of a writer (NAME.tmp.PID.N) never count. Error when
// fewer than `n` are there.
std::vector<std::string> newest_checkpoints(const std::string& dir, int64_t n);

struct AverageOptions {
  // Copy the optional sections of the newest input (the greatest step; the
  // last one given among equals) verbatim; Error if it has none.
  bool keep_state = false;
  // Check every input as a model checkpoint (the one validation of
  // model_file.h: configuration, tensor table, vocabulary).
  // Off only for files that hold no model (the unit tests' hand-made ones).
  bool check_model = true;
  io::CheckpointWriteOptions write;
  Progress* progress = nullptr;  // the inputs' parameters summed so far, then the writing
};

struct AverageReport {
  int64_t tensors = 0;
  int64_t elements = 0;
  std::string newest;                 // the input whose sections were kept, with keep_state
  std::vector<std::string> sections;  // the sections kept
};

AverageReport average_checkpoints(const std::vector<std::string>& inputs,
                                  const std::string& output, const AverageOptions& options = {});

}  // namespace tfm
