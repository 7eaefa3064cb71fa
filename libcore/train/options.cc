#include "libcore/train/options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <variant>

#include "libcore/base/error.h"
#include "libcore/base/range.h"
#include "libcore/io/key_value.h"

namespace tfm::train {
namespace {

constexpr double kHuge = 1e300;
constexpr double kMaxInt = 1e15;  // integer knobs stay exact in a double

enum class Kind { number, integer, seed, duration, precision, schedule };
using Member = std::variant<double TrainOptions::*, int64_t TrainOptions::*, uint64_t TrainOptions::*,
                            Precision TrainOptions::*, LrSchedule TrainOptions::*>;

// One training knob. `lo` is exclusive when lo_open (a positive number).
struct Field {
  const char* key;
  Kind kind;
  Member member;
  double lo, hi;
  bool lo_open;
  const char* type;
  const char* help;
};

const Field kFields[] = {
    {"lr-schedule", Kind::schedule, &TrainOptions::lr_schedule, 0, 0, false, "S",
     "noam (the paper's), inverse-sqrt, linear, cosine or constant (man tfm-train)"},
    {"lr-scale", Kind::number, &TrainOptions::lr_scale, 0, kHuge, true, "X",
     "Multiply the paper's learning rate d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) by X"},
    {"lr", Kind::number, &TrainOptions::lr, 0, kHuge, false, "X",
     "The peak learning rate of the schedules but noam, reached after the warm-up"},
    {"min-lr", Kind::number, &TrainOptions::min_lr, 0, kHuge, false, "X",
     "linear and cosine: the learning rate they decay to"},
    {"warmup", Kind::integer, &TrainOptions::warmup, 1, kMaxInt, false, "STEPS",
     "Warm-up steps of the learning-rate schedule"},
    {"decay-steps", Kind::integer, &TrainOptions::decay_steps, 0, kMaxInt, false, "N",
     "linear and cosine: the update at which they reach --min-lr (0: --max-steps)"},
    {"adam-beta1", Kind::number, &TrainOptions::adam_beta1, 0, 0.999999, false, "B", "Adam's beta1"},
    {"adam-beta2", Kind::number, &TrainOptions::adam_beta2, 0, 0.999999999, false, "B", "Adam's beta2"},
    {"adam-eps", Kind::number, &TrainOptions::adam_eps, 0, 1, true, "E", "Adam's epsilon"},
    {"weight-decay", Kind::number, &TrainOptions::weight_decay, 0, 1e6, false, "X",
     "Decoupled weight decay (AdamW): each update first multiplies the parameters by 1 - lr X"},
    {"max-tokens", Kind::integer, &TrainOptions::max_tokens, 0, kMaxInt, false, "N",
     "Re-pack the corpora into batches of N tokens a side, padding counted (0: as tfm-batch packed "
     "the first)"},
    {"update-freq", Kind::integer, &TrainOptions::update_freq, 1, 1 << 20, false, "N",
     "Accumulate the gradients of N batches into one update"},
    {"max-steps", Kind::integer, &TrainOptions::max_steps, 0, kMaxInt, false, "N",
     "Stop after N updates (0: no limit)"},
    {"max-epochs", Kind::integer, &TrainOptions::max_epochs, 0, kMaxInt, false, "N",
     "Stop after N epochs: passes over the corpora, as --weights draws them (0: no limit)"},
    {"max-time", Kind::duration, &TrainOptions::max_time, 0, kHuge, false, "TIME",
     "Stop after this much training, over all resumed runs (10m, 5h, 2d; 0: no limit)"},
    {"seed", Kind::seed, &TrainOptions::seed, 0, 0, false, "N",
     "Seed of the initialization, the dropout masks and the batch order"},
    {"precision", Kind::precision, &TrainOptions::precision, 0, 0, false, "P",
     "Compute in auto (bf16 on a GPU, fp32 on the CPU), fp32, tf32, bf16 or fp16 (fp16 with "
     "dynamic loss scaling); tf32, bf16, fp16: CUDA only"},
    {"clip-norm", Kind::number, &TrainOptions::clip_norm, 0, kHuge, false, "X",
     "Scale gradients down to a norm of at most X (0: no clipping)"},
    {"save-every", Kind::duration, &TrainOptions::save_every, 0, kHuge, false, "TIME",
     "Write a checkpoint every TIME of wall clock (0: only by steps and at the end)"},
    {"save-every-steps", Kind::integer, &TrainOptions::save_every_steps, 0, kMaxInt, false, "N",
     "Write a checkpoint every N updates (0: off)"},
    {"keep-last", Kind::integer, &TrainOptions::keep_last, 0, kMaxInt, false, "N",
     "Keep the N newest numbered checkpoints (0: keep all)"},
    {"valid-every", Kind::integer, &TrainOptions::valid_every, 1, kMaxInt, false, "N",
     "Validate on the dev corpus every N updates"},
    {"early-stop", Kind::integer, &TrainOptions::early_stop, 0, kMaxInt, false, "N",
     "Stop after N validations in a row without a better dev perplexity (0: off)"},
    {"max-bad-steps", Kind::integer, &TrainOptions::max_bad_steps, 1, kMaxInt, false, "K",
     "Stop with an error after K steps in a row with a NaN or infinite loss or gradient"},
    {"log-every", Kind::integer, &TrainOptions::log_every, 1, kMaxInt, false, "N",
     "Print a progress line (and write a --log record) every N updates"},
    {"dist-timeout", Kind::duration, &TrainOptions::dist_timeout, 0, kHuge, true, "TIME",
     "Several processes (mpirun, srun): stop every rank when one has not answered for TIME "
     "(it died or hangs)"},
    {"bucket-mb", Kind::integer, &TrainOptions::bucket_mb, 1, 1 << 20, false, "MB",
     "Several processes: sum the gradient over the ranks in buckets of about MB MiB, each as soon "
     "as backward completes it"},
};

// --weights: a list, so not a row of kFields.
constexpr const char* kWeightsKey = "weights";

const Field& field(std::string_view key) {
  for (const Field& f : kFields)
    if (key == f.key) return f;
  fail("unknown training option '{}'", key);
}

// The model knobs: ModelConfig keys, the type --help shows, and what they mean.
struct ModelField {
  const char* key;
  const char* type;
  const char* help;
};
const ModelField kModelFields[] = {
    {"layers", "INT", "N: layers in the encoder and in the decoder"},
    {"d_model", "INT", "d_model: the width of every layer's input and output"},
    {"d_ff", "INT", "d_ff: the inner width of the feed-forward layers"},
    {"heads", "INT", "h: attention heads"},
    {"d_k", "INT", "d_k: query and key width per head"},
    {"d_v", "INT", "d_v: value width per head"},
    {"dropout", "NUM", "P_drop: dropout on sub-layer outputs and on embeddings + positions"},
    {"attention_dropout", "NUM", "Dropout on the attention weights"},
    {"label_smoothing", "NUM", "eps_ls: label smoothing"},
    {"learned_positions", "[BOOL]", "Learned positions instead of sinusoids (Table 3 row E)"},
    {"max_positions", "INT", "Longest sentence the positions cover"},
    {"share_embeddings", "[BOOL]", "One matrix for source and target embeddings and the output projection"},
    {"pre_norm", "[BOOL]", "Layer norm before each sub-layer instead of after it"},
    {"layer_norm_eps", "NUM", "Epsilon of layer norm"},
};

std::map<std::string, std::string, std::less<>> config_values(const ModelConfig& c) {
  std::map<std::string, std::string, std::less<>> values;
  io::for_each_key_value(c.to_text(), "config", [&](std::string_view k, std::string_view v) {
    values.emplace(k, v);
  });
  return values;
}

std::string knob_key(std::string_view model_key) {
  std::string k(model_key);
  std::replace(k.begin(), k.end(), '_', '-');
  return k;
}

// A text value as CLI11's INI reader reads it back: quoted when it holds a
// space (which would split it into several values).
std::string ini_value(const std::string& v) {
  if (v.find(' ') == std::string::npos) return v;
  return v.find('"') == std::string::npos ? '"' + v + '"' : '\'' + v + '\'';
}

// A library Error as a usage error for the option `name`: exit status 2.
// "--d-model: must be at least 1, got 0" (app.h makes the option the
// sentence's subject): the parser's own name of the value, `key`, dropped.
[[noreturn]] void usage_error(const std::string& name, std::string_view key, const Error& e) {
  std::string_view what = e.what();
  if (what.rfind("config: ", 0) == 0) what.remove_prefix(8);  // ModelConfig's prefix
  if (what.rfind(key, 0) == 0 && what.substr(key.size()).rfind(" must be ", 0) == 0)
    what.remove_prefix(key.size() + 1);
  throw CLI::ValidationError(name, std::string(what));
}

}  // namespace

double parse_duration(std::string_view what, std::string_view text) {
  const auto bad = [&] {
    fail("{} must be a duration such as 10m, 1h30m, 45s or 90 (seconds), got '{}'", what, text);
  };
  const std::string_view t = io::trim(text);
  double total = 0;
  std::string units_seen;
  for (const char* p = t.data(), *end = t.data() + t.size(); p != end;) {
    double x = 0;
    // general, not fixed: format_duration writes 7.5e+99s or 5e-05s for
    // values past fmt's plain range, and the text must read back (found by
    // tests/fuzz/fuzz_config).
    const auto [next, ec] = std::from_chars(p, end, x, std::chars_format::general);
    if (ec != std::errc() || !(x >= 0) || !std::isfinite(x)) bad();
    p = next;
    if (p == end) {  // plain seconds, only as the whole text
      if (!units_seen.empty()) bad();
      total += x;
      break;
    }
    const char unit = *p++;
    const double scale = unit == 'd' ? 86400 : unit == 'h' ? 3600 : unit == 'm' ? 60 : unit == 's' ? 1 : -1;
    if (scale < 0 || units_seen.find(unit) != std::string::npos) bad();
    units_seen += unit;
    total += x * scale;
  }
  if (t.empty() || !std::isfinite(total)) bad();
  return total;
}

std::string format_duration(double seconds) {
  if (seconds == 0) return "0";
  if (seconds != std::floor(seconds) || seconds > 1e15) return fmt::format("{}s", seconds);
  auto s = static_cast<int64_t>(seconds);
  std::string out;
  for (const auto& [unit, size] : {std::pair{'d', 86400}, {'h', 3600}, {'m', 60}, {'s', 1}}) {
    if (s >= size) out += fmt::format("{}{}", s / size, unit);
    s %= size;
  }
  return out;
}

std::string weights_text(const std::vector<double>& weights) {
  std::string out;
  for (const double w : weights) out += fmt::format("{}{}", out.empty() ? "" : " ", w);
  return out;
}

std::vector<double> parse_weights(std::string_view text) {
  std::vector<double> out;
  std::string_view rest = io::trim(text);
  while (!rest.empty()) {
    const size_t end = std::min(rest.find_first_of(" \t"), rest.size());
    const double w = io::parse_double(kWeightsKey, rest.substr(0, end), -kHuge, kHuge);
    if (w <= 0) fail("{} must be above 0, got {}", kWeightsKey, plain_number(w));
    out.push_back(w);
    rest = io::trim(rest.substr(end));
  }
  TFM_REQUIRE(!out.empty(), "{} needs a factor for each training corpus, got none", kWeightsKey);
  return out;
}

void TrainOptions::set(std::string_view key, std::string_view value) {
  if (key == kWeightsKey) {
    weights = parse_weights(value);
    return;
  }
  const Field& f = field(key);
  const std::string_view v = io::trim(value);
  switch (f.kind) {
    case Kind::number: {
      const double x = io::parse_double(f.key, v, f.lo, f.hi);
      if (f.lo_open && x <= f.lo)
        fail("{} must be above {}, got {}", f.key, plain_number(f.lo), plain_number(x));
      this->*std::get<double TrainOptions::*>(f.member) = x;
      break;
    }
    case Kind::integer:
      this->*std::get<int64_t TrainOptions::*>(f.member) =
          io::parse_int(f.key, v, static_cast<int64_t>(f.lo), static_cast<int64_t>(f.hi));
      break;
    case Kind::seed:
      this->*std::get<uint64_t TrainOptions::*>(f.member) = io::parse_uint(f.key, v);
      break;
    case Kind::duration:
      this->*std::get<double TrainOptions::*>(f.member) = parse_duration(f.key, v);
      break;
    case Kind::precision:
      this->*std::get<Precision TrainOptions::*>(f.member) = kTrainPrecision.parse(f.key, v);
      break;
    case Kind::schedule:
      this->*std::get<LrSchedule TrainOptions::*>(f.member) = parse_lr_schedule(v);
      break;
  }
}

std::string TrainOptions::get(std::string_view key) const {
  if (key == kWeightsKey) return weights_text(weights);
  const Field& f = field(key);
  switch (f.kind) {
    case Kind::number: return fmt::format("{}", this->*std::get<double TrainOptions::*>(f.member));
    case Kind::integer: return fmt::format("{}", this->*std::get<int64_t TrainOptions::*>(f.member));
    case Kind::seed: return fmt::format("{}", this->*std::get<uint64_t TrainOptions::*>(f.member));
    case Kind::duration: return format_duration(this->*std::get<double TrainOptions::*>(f.member));
    case Kind::precision:
      return std::string(precision_name(this->*std::get<Precision TrainOptions::*>(f.member)));
    case Kind::schedule:
      return std::string(lr_schedule_name(this->*std::get<LrSchedule TrainOptions::*>(f.member)));
  }
  return {};
}

ScheduleConfig TrainOptions::schedule(int64_t d_model) const {
  ScheduleConfig c;
  c.kind = lr_schedule;
  c.d_model = d_model;
  c.warmup = warmup;
  c.scale = lr_scale;
  c.lr = lr;
  c.min_lr = min_lr;
  c.decay_steps = decay_steps > 0 ? decay_steps : max_steps;
  const std::string_view name = lr_schedule_name(lr_schedule);
  if (lr_schedule != LrSchedule::noam) TFM_REQUIRE(lr > 0, "--lr-schedule {} needs --lr, its peak", name);
  if (lr_schedule == LrSchedule::linear || lr_schedule == LrSchedule::cosine)
    TFM_REQUIRE(c.decay_steps > warmup,
                "--lr-schedule {} decays until --decay-steps (else --max-steps), which must be past --warmup {}: "
                "got {}", name, warmup, c.decay_steps);
  return c;
}

AdamConfig TrainOptions::adam() const {
  return {static_cast<float>(adam_beta1), static_cast<float>(adam_beta2), static_cast<float>(adam_eps),
          static_cast<float>(weight_decay)};
}

std::string TrainOptions::to_text() const {
  std::string out;
  for (const Field& f : kFields) out += fmt::format("{} = {}\n", f.key, get(f.key));
  if (!weights.empty()) out += fmt::format("{} = {}\n", kWeightsKey, weights_text(weights));
  return out;
}

const std::vector<Knob>& train_knobs() {
  static const std::vector<Knob> knobs = [] {
    std::vector<Knob> k;
    for (const Field& f : kFields) k.push_back({f.key, f.type, f.help});
    return k;
  }();
  return knobs;
}

const std::vector<Knob>& model_knobs() {
  static const std::vector<Knob> knobs = [] {
    const auto base = config_values(ModelConfig::preset("base"));
    const auto big = config_values(ModelConfig::preset("big"));
    const auto tiny = config_values(ModelConfig::preset("tiny"));
    std::vector<Knob> k;
    for (const ModelField& f : kModelFields)
      k.push_back({knob_key(f.key), f.type,
                   fmt::format("{} (base {}, big {}, tiny {})", f.help, base.at(f.key),
                               big.at(f.key), tiny.at(f.key))});
    return k;
  }();
  return knobs;
}

std::string model_key(std::string_view knob) {
  std::string k(knob);
  std::replace(k.begin(), k.end(), '-', '_');
  return k;
}

bool Overrides::given(std::string_view train_key) const {
  return std::any_of(train.begin(), train.end(), [&](const auto& kv) { return kv.first == train_key; });
}

void add_model_options(CLI::App& app, Overrides& o) {
  app.add_option("--preset", o.preset, "The model's preset, before the knobs below: base, big or tiny")
      ->check(CLI::IsMember({"base", "big", "tiny"}))
      ->group("Model");
  for (const Knob& k : model_knobs()) {
    const std::string name = "--" + k.key, key = model_key(k.key);
    const bool flag = k.type == "[BOOL]";
    CLI::Option* opt = app.add_option_function<std::string>(
        name,
        [&o, name, key, flag](const std::string& value) {
          const std::string v = flag && value.empty() ? "true" : value;  // a bare --pre-norm
          try {
            ModelConfig probe;
            probe.set(key, v);
          } catch (const Error& e) {
            usage_error(name, key, e);
          }
          o.model.emplace_back(key, v);
        },
        k.help);
    opt->type_name(k.type)->group("Model")->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    if (flag) opt->expected(0, 1);
  }
}

void add_train_options(CLI::App& app, Overrides& o) {
  const TrainOptions defaults;
  for (const Knob& k : train_knobs()) {
    const std::string name = "--" + k.key, key = k.key;
    app.add_option_function<std::string>(
           name,
           [&o, name, key](const std::string& value) {
             try {
               TrainOptions probe;
               probe.set(key, value);
             } catch (const Error& e) {
               usage_error(name, key, e);
             }
             o.train.emplace_back(key, value);
           },
           k.help)
        ->type_name(k.type)
        ->default_str(defaults.get(k.key))
        ->group("Training")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
  // One or more factors, one override: every value given counts, in order
  // (the corpora go before it: it takes the values that follow).
  app.add_option_function<std::vector<std::string>>(
         "--weights",
         [&o](const std::vector<std::string>& values) {
           std::string text;
           for (const std::string& v : values) text += (text.empty() ? "" : " ") + v;
           try {
             (void)parse_weights(text);
           } catch (const Error& e) {
             usage_error("--weights", kWeightsKey, e);
           }
           o.train.emplace_back(kWeightsKey, text);
         },
         "Upsample the training corpora: one factor F > 0 each, in their order (1 0.5: the "
         "second corpus at half its size); an epoch draws floor(F) copies of a corpus's batches "
         "and a share frac(F) of them more")
      ->type_name("F...")
      ->expected(1, -1)
      ->default_str("1 each")
      ->group("Training")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

ModelConfig requested_model(const Overrides& o) {
  ModelConfig c = ModelConfig::preset(o.preset.empty() ? "base" : o.preset);
  for (const auto& [key, value] : o.model) c.set(key, value);
  return c;
}

namespace {

// What the model options given ask of a checkpoint's model `have`: the
// preset's (when given) or `have`'s, with the knobs given on top;
// vocab_size stays `have`'s.
ModelConfig asked_of(const ModelConfig& have, const Overrides& o) {
  ModelConfig want = o.preset.empty() ? have : requested_model(o);
  for (const auto& [key, value] : o.model) want.set(key, value);
  want.vocab_size = have.vocab_size;
  return want;
}

// "d_model = 32 (asked: 512), ..." for every key where `want` differs from
// `have`, the training-only ones left out when `architecture`.
std::string differences(const ModelConfig& have, const ModelConfig& want, bool architecture) {
  const auto a = config_values(have), b = config_values(want);
  std::string diff;
  for (const auto& [key, value] : a)
    if (b.at(key) != value && !(architecture && training_only_key(key)))
      diff += fmt::format("{}{} = {} (asked: {})", diff.empty() ? "" : ", ", key, value, b.at(key));
  return diff;
}

}  // namespace

void check_model_overrides(const ModelConfig& have, const Overrides& o, const std::string& what) {
  const ModelConfig want = asked_of(have, o);
  if (want == have) return;
  fail("architecture mismatch: {} holds another model than the options ask for: {}; leave the "
       "model's options out when resuming",
       what, differences(have, want, /*architecture=*/false));
}

bool training_only_key(std::string_view key) {
  return key == "dropout" || key == "attention_dropout" || key == "label_smoothing";
}

ModelConfig fine_tuned_model(const ModelConfig& have, const Overrides& o, const std::string& what) {
  const std::string diff = differences(have, asked_of(have, o), /*architecture=*/true);
  TFM_REQUIRE(diff.empty(),
              "architecture mismatch: {} holds another model than the options ask for: {}; "
              "fine-tuning keeps the checkpoint's architecture (only --dropout, "
              "--attention-dropout and --label-smoothing may change): leave the others out",
              what, diff);
  ModelConfig tuned = have;
  for (const auto& [key, value] : o.model)
    if (training_only_key(key)) tuned.set(key, value);
  return tuned;
}

std::string config_file_text(const ModelConfig& model, const TrainOptions& train,
                             const std::string& init) {
  const auto values = config_values(model);
  std::string out = "# tfm-train configuration; tfm-train --config FILE reads it back.\n";
  if (!init.empty())
    out += fmt::format("# Fine-tuning: the weights and the architecture the run starts from.\n"
                       "init = {}\n",
                       ini_value(init));
  out += "# The model (the paper's Table 3); the vocabulary decides its size.\n";
  for (const ModelField& f : kModelFields) out += fmt::format("{} = {}\n", knob_key(f.key), values.at(f.key));
  out += "# Training.\n";
  return out + train.to_text();
}

}  // namespace tfm::train
