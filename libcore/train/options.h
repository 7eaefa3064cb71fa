// tfm-train's knobs: the training options (learning rate, batches,
// precision, checkpoints, validation, stopping), the model's Table 3 knobs
// on the command line, and the configuration file that --dump-config
// prints and --config reads back (CLI11's INI form: "key = value" lines,
// keys are the long option names without "--").
//
// Every knob is one row of one table (options.cc): its key, its type, its
// help and its range. The command line, the configuration file and the
// training state in checkpoints (libcore/train/state.h) all go through
// TrainOptions::set and ::get, so their spellings cannot drift apart.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "libcore/base/precision.h"
#include "libcore/model/config.h"
#include "libcore/train/optimizer.h"
#include "libcore/train/schedule.h"

namespace CLI {
class App;
}  // namespace CLI

namespace tfm::train {

// --precision (libcore/base/precision.h, kTrainPrecision): auto (the default) is
// decided where the run runs (a resumed run follows its new device); fp16
// trains with dynamic loss scaling. Master weights and Adam's moments are
// f32 in every case.

// A duration: "10m", "1h30m", "45s", "2d", or plain seconds ("90", "0.5").
// 0 means "never" where the option says so.
double parse_duration(std::string_view what, std::string_view text);
std::string format_duration(double seconds);  // "10m", "1h30m", "0.5s", "0"

struct TrainOptions {
  LrSchedule lr_schedule = LrSchedule::noam;  // libcore/train/schedule.h
  double lr_scale = 1.0;        // times the paper's schedule (noam)
  double lr = 0;                // the other schedules' peak
  double min_lr = 0;            // linear and cosine: the floor
  int64_t warmup = 4000;        // warm-up steps of the schedule
  int64_t decay_steps = 0;      // linear and cosine: the step the floor is reached (0: max_steps)
  double adam_beta1 = 0.9, adam_beta2 = 0.98, adam_eps = 1e-9;  // the paper's
  double weight_decay = 0;      // decoupled (AdamW); the paper's is 0
  int64_t max_tokens = 0;       // per batch and side, padding counted; 0: as the corpus is packed
  int64_t update_freq = 1;      // batches accumulated into one update
  int64_t max_steps = 0;        // updates; 0: no limit
  int64_t max_epochs = 0;       // 0: no limit
  double max_time = 0;          // seconds of training over all runs; 0: no limit
  uint64_t seed = 1;            // initialization, dropout, batch order
  Precision precision = Precision::automatic;
  double clip_norm = 0;         // 0: no clipping (the paper's)
  double save_every = 600;      // seconds between checkpoints (the paper's 10 minutes); 0: off
  int64_t save_every_steps = 0; // 0: off
  int64_t keep_last = 5;        // numbered checkpoints kept; 0: all
  int64_t valid_every = 1000;   // steps between validations (with a dev corpus)
  int64_t early_stop = 0;       // stop after N validations without a better dev perplexity; 0: off
  int64_t max_bad_steps = 5;    // stop after N consecutive NaN/inf steps
  int64_t log_every = 100;      // steps between progress lines (and JSON log records)
  double dist_timeout = 600;    // several processes: seconds a rank waits for the others
  int64_t bucket_mb = 25;       // several processes: MiB of gradient a sum starts with
  // --weights: the upsampling factor of each training corpus, in the order
  // given (libcore/train/data.h, mixed_epoch_order); empty: 1 each. Not a
  // row of the knob table (it is a list): set, get and to_text take it
  // under "weights", and to_text leaves it out when empty.
  std::vector<double> weights;

  // key: the option's long name without "--" ("lr-scale"). Errors name the key.
  void set(std::string_view key, std::string_view value);
  std::string get(std::string_view key) const;
  // Every knob, one "key = value" line each, in table order; then
  // "weights = F ..." when weights are set.
  std::string to_text() const;

  // The schedule and Adam these options ask for; Error (naming the
  // options) when a schedule lacks what it needs: --lr above 0 for all but
  // noam, and for linear and cosine a decay past the warm-up (--decay-steps,
  // else --max-steps).
  ScheduleConfig schedule(int64_t d_model) const;
  AdamConfig adam() const;

  friend bool operator==(const TrainOptions&, const TrainOptions&) = default;
};

struct Knob {
  std::string key;   // as in the configuration file: "lr-scale", "d-model"
  std::string type;  // for --help: "NUM", "INT", "TIME", ...
  std::string help;
};
// In to_text order. (--weights, a list, is added by add_train_options
// apart from these.)
const std::vector<Knob>& train_knobs();
// Every ModelConfig key but vocab_size (the vocabulary decides it), with
// '_' spelled '-'; the help gives each preset's value.
const std::vector<Knob>& model_knobs();
std::string model_key(std::string_view knob_key);  // "d-model" -> "d_model"

// What the command line and --config asked for, in the order given.
struct Overrides {
  std::string preset;  // empty: not given
  std::vector<std::pair<std::string, std::string>> model;  // (ModelConfig key, text)
  std::vector<std::pair<std::string, std::string>> train;  // (TrainOptions key, text)
  bool given(std::string_view train_key) const;
};

// --preset and one option per model knob (group "Model"), and one option
// per training knob (group "Training"), and --weights F... (one or more
// values, kept as one "weights" override). Values are checked while parsing,
// so a bad one is a usage error (exit 2) naming the option. Given twice on
// the command line, the last one counts; the command line wins over --config.
void add_model_options(CLI::App& app, Overrides& overrides);
void add_train_options(CLI::App& app, Overrides& overrides);

// preset (base when not given) + model overrides; vocab_size is left as the
// preset has it.
ModelConfig requested_model(const Overrides& overrides);

// When resuming: the model options given must describe `have`, the
// checkpoint's model; Error "architecture mismatch: ..." naming every key
// that differs. `what` names the checkpoint.
void check_model_overrides(const ModelConfig& have, const Overrides& overrides,
                           const std::string& what);

// The ModelConfig keys that shape training, not the model: a fine-tuned
// model may change them (dropout, attention_dropout, label_smoothing).
bool training_only_key(std::string_view model_key);

// When fine-tuning (--init): `have`, the checkpoint's model, with the
// training-only knobs given on top. Every other key must stay `have`'s
// (the preset and knobs given may repeat it); Error "architecture
// mismatch: ..." naming each key that differs and both values. Keys are
// compared through ModelConfig's text form, so a new field is covered
// without a change here.
ModelConfig fine_tuned_model(const ModelConfig& have, const Overrides& overrides,
                             const std::string& what);

// The file --dump-config prints: every model knob and every training knob,
// as "key = value" lines that --config reads back to the same values; and
// first, when fine-tuning, "init = CHECKPOINT".
std::string config_file_text(const ModelConfig& model, const TrainOptions& train,
                             const std::string& init = {});

// "1 0.5": weights as the configuration file and the training state write
// them; parse_weights reads that back (factors finite and above 0, at
// least one; Error naming "weights" otherwise).
std::string weights_text(const std::vector<double>& weights);
std::vector<double> parse_weights(std::string_view text);

}  // namespace tfm::train
