#include "libcore/train/state.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "libcore/base/error.h"
#include "libcore/io/checkpoint.h"
#include "libcore/io/key_value.h"
#include "libcore/model/model_io.h"

namespace tfm::train {

namespace {

// A corpus's identity under `prefix`: "corpus" for the first (the keys of
// every state), "corpus2", "corpus3", ... for the ones after it.
std::string corpus_text(const std::string& prefix, const CorpusIdentity& c) {
  return fmt::format("{0}_vocab = {1}\n{0}_pairs = {2}\n{0}_src_tokens = {3}\n{0}_tgt_tokens = {4}\n"
                     "{0}_digest = {5}\n",
                     prefix, c.vocab, c.pairs, c.src_tokens, c.tgt_tokens, c.digest);
}

// Sets the field `name` ("vocab", "pairs", ...) of `c`; false for no such field.
bool set_corpus_field(CorpusIdentity& c, std::string_view name, std::string_view key,
                      std::string_view v) {
  auto count = [&] { return io::parse_int(key, v, 0, INT64_MAX); };
  if (name == "vocab") c.vocab = std::string(v);
  else if (name == "pairs") c.pairs = count();
  else if (name == "src_tokens") c.src_tokens = count();
  else if (name == "tgt_tokens") c.tgt_tokens = count();
  else if (name == "digest") c.digest = std::string(v);
  else return false;
  return true;
}

// "corpus7_pairs": corpus 7 (>= 2) and "pairs"; nullopt for another key.
std::optional<std::pair<int64_t, std::string_view>> numbered_corpus_key(std::string_view key) {
  if (!key.starts_with("corpus")) return std::nullopt;
  const std::string_view rest = key.substr(6);
  const size_t digits = rest.find_first_not_of("0123456789");
  if (digits == 0 || digits == std::string_view::npos || rest[digits] != '_') return std::nullopt;
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + digits, n);
  if (ec != std::errc() || n < 2 || n > kMaxCorpora) return std::nullopt;
  return std::pair{n, rest.substr(digits + 1)};
}

}  // namespace

std::vector<CorpusIdentity> TrainState::corpora() const {
  std::vector<CorpusIdentity> all{corpus};
  all.insert(all.end(), more_corpora.begin(), more_corpora.end());
  return all;
}

std::vector<double> TrainState::weights() const {
  return options.weights.empty() ? std::vector<double>(more_corpora.size() + 1, 1.0) : options.weights;
}

std::string TrainState::to_text() const {
  std::string t = fmt::format("format = {}\n", kTrainStateFormat);
  t += fmt::format("step = {}\nmicro_batches = {}\nepoch = {}\ncursor = {}\n", step, micro_batches,
                   epoch, cursor);
  t += fmt::format("loss_scale = {}\nloss_scale_streak = {}\nelapsed = {}\ntokens = {}\n",
                   loss_scale, loss_scale_streak, elapsed, tokens);
  t += fmt::format("bad_steps = {}\nconsecutive_bad = {}\noverflow_steps = {}\n", bad_steps,
                   consecutive_bad, overflow_steps);
  t += fmt::format("best_dev_nll = {}\nbest_step = {}\nstale_validations = {}\n",
                   best_dev_nll ? fmt::format("{}", *best_dev_nll) : "none", best_step,
                   stale_validations);
  t += corpus_text("corpus", corpus);
  t += fmt::format("batches = {}\nranks = {}\n", batches, ranks);
  if (!more_corpora.empty()) t += fmt::format("corpora = {}\n", more_corpora.size() + 1);
  for (size_t i = 0; i < more_corpora.size(); ++i)
    t += corpus_text(fmt::format("corpus{}", i + 2), more_corpora[i]);
  return t + "[options]\n" + options.to_text();
}

TrainState TrainState::parse(std::string_view text, std::string_view source) {
  TrainState s;
  int format = 0;
  int64_t corpora = 1;
  constexpr int64_t kMax = INT64_MAX;
  io::for_each_key_value(text, source, [&](std::string_view key, std::string_view v) {
    auto count = [&](int64_t lo) { return io::parse_int(key, v, lo, kMax); };
    if (key == "format") {
      format = static_cast<int>(io::parse_int(key, v, 1, 1 << 30));
      if (format != kTrainStateFormat)
        fail("training state format {} is not the {} this tfm reads (a newer tfm wrote it?)",
             format, kTrainStateFormat);
    }
    else if (key == "step") s.step = count(0);
    else if (key == "micro_batches") s.micro_batches = count(0);
    else if (key == "epoch") s.epoch = count(1);
    else if (key == "cursor") s.cursor = count(0);
    else if (key == "loss_scale") s.loss_scale = io::parse_double(key, v, 1, 1e300);
    else if (key == "loss_scale_streak") s.loss_scale_streak = count(0);
    else if (key == "elapsed") s.elapsed = io::parse_double(key, v, 0, 1e300);
    else if (key == "tokens") s.tokens = count(0);
    else if (key == "bad_steps") s.bad_steps = count(0);
    else if (key == "consecutive_bad") s.consecutive_bad = count(0);
    else if (key == "overflow_steps") s.overflow_steps = count(0);
    else if (key == "best_dev_nll")
      s.best_dev_nll = v == "none" ? std::nullopt : std::optional(io::parse_double(key, v, 0, 1e300));
    else if (key == "best_step") s.best_step = count(0);
    else if (key == "stale_validations") s.stale_validations = count(0);
    else if (key.starts_with("corpus_") && set_corpus_field(s.corpus, key.substr(7), key, v)) {}
    else if (key == "batches") s.batches = count(1);
    else if (key == "ranks") s.ranks = count(1);  // absent before data parallelism: 1
    else if (key == "corpora") corpora = io::parse_int(key, v, 2, kMaxCorpora);  // absent: 1
    else if (const auto numbered = numbered_corpus_key(key)) {
      const size_t i = static_cast<size_t>(numbered->first - 2);
      if (s.more_corpora.size() <= i) s.more_corpora.resize(i + 1);
      if (!set_corpus_field(s.more_corpora[i], numbered->second, key, v)) s.options.set(key, v);
    }
    else s.options.set(key, v);  // the training options; unknown keys fail there
  });
  const auto count_of = static_cast<size_t>(corpora);
  if (s.more_corpora.size() + 1 != count_of)
    throw Error(fmt::format("the training state has {} corpora, and keys of {}", count_of,
                            s.more_corpora.size() + 1),
                std::string(source));
  if (!s.options.weights.empty() && s.options.weights.size() != count_of)
    throw Error(fmt::format("the training state has {} corpora and {} weights", count_of,
                            s.options.weights.size()),
                std::string(source));
  if (format == 0) throw Error("the training state has no format line", std::string(source));
  if (s.cursor > s.batches)
    throw Error(fmt::format("the training state's cursor {} is past its {} batches", s.cursor,
                            s.batches),
                std::string(source));
  return s;
}

namespace {

// Adam's moments in a file follow its tensor table (man tfm.7, "Training
// state"): tensor i at element o_i, o_(i+1) = o_i + n_i rounded up to 64,
// zeros between. The flat buffer in memory may lay tensors out otherwise
// (ParamLayout joins an attention's q, k and v), so the two map by name.
constexpr int64_t kMomentAlign = 64;
int64_t moment_slot(int64_t n) { return (n + kMomentAlign - 1) / kMomentAlign * kMomentAlign; }

// The moments `flat` (host, f32, the model's layout) as the file lays them out.
std::vector<float> moments_for_file(const ParamLayout& layout, const TensorView& flat) {
  int64_t total = 0;
  for (const ParamEntry& e : layout.entries()) total += moment_slot(e.shape.numel());
  std::vector<float> out(static_cast<size_t>(total), 0.0f);
  int64_t o = 0;
  for (size_t id = 0; id < layout.entries().size(); ++id) {
    const TensorView t = layout.view(flat, static_cast<int>(id));
    std::copy_n(t.data_as<float>(), t.numel(), out.begin() + o);
    o += moment_slot(t.numel());
  }
  return out;
}

}  // namespace

void save_checkpoint(const std::string& path, const Transformer& model,
                     const std::string& tokenizer, const TrainState& state) {
  TFM_REQUIRE(model.param_dtype() == DType::f32,
              "cannot write {}: training checkpoints hold f32 parameters, not {}", path,
              dtype_name(model.param_dtype()));
  auto [m, v] = model.optimizer_state();
  Tensor host_m, host_v;  // staging copies of a GPU model's moments
  if (!model.device().is_cpu()) {
    host_m = Tensor(m.shape(), m.dtype());
    host_v = Tensor(v.shape(), v.dtype());
    copy(host_m, m, model.stream());
    copy(host_v, v, model.stream());
    m = host_m.view();
    v = host_v.view();
  }
  const std::vector<float> file_m = moments_for_file(model.layout(), m);
  const std::vector<float> file_v = moments_for_file(model.layout(), v);
  auto bytes = [](const std::vector<float>& x) {
    return std::string_view(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float));
  };
  const std::string text = state.to_text();
  const io::NamedSection sections[] = {
      {kStateSection, text}, {kAdamM, bytes(file_m)}, {kAdamV, bytes(file_v)}};
  save_model(path, model, tokenizer, sections);
}

TrainState read_state(const io::CheckpointReader& checkpoint) {
  const std::string& path = checkpoint.path();
  const io::CheckpointInfo& info = checkpoint.info();
  const bool has = std::any_of(info.sections.begin(), info.sections.end(),
                               [](const io::SectionInfo& s) { return s.name == kStateSection; });
  TFM_REQUIRE(has,
              "{} holds no training state (a model for decoding, such as an average of "
              "checkpoints): it cannot be resumed",
              path);
  return TrainState::parse(checkpoint.section(kStateSection),
                           path + " (training state)");
}

void load_checkpoint(const ModelFile& checkpoint, Transformer& model) {
  const std::string& path = checkpoint.path();
  // The alignment gaps between tensors hold zeros, as after init().
  const TensorView p = model.params();
  device_memset_zero(p.data(), p.device(), p.bytes(), model.stream());
  checkpoint.load_parameters(model);  // every tensor of the table is the model's, and no other
  const ParamLayout& layout = model.layout();
  const io::CheckpointInfo& info = checkpoint.reader().info();
  int64_t total = 0;
  for (const io::TensorInfo& t : info.tensors) total += moment_slot(t.shape.numel());
  const auto [m, v] = model.optimizer_state();
  Tensor host(m.shape(), DType::f32);
  for (const auto& [name, dst] : {std::pair{kAdamM, m}, std::pair{kAdamV, v}}) {
    const std::string bytes = checkpoint.reader().section(name);
    TFM_REQUIRE(bytes.size() == static_cast<size_t>(total) * sizeof(float),
                "{}: section '{}' holds {} bytes, but the model's Adam moments take {}", path, name,
                bytes.size(), total * static_cast<int64_t>(sizeof(float)));
    std::fill_n(host.data_as<float>(), host.numel(), 0.0f);
    int64_t o = 0;
    for (const io::TensorInfo& t : info.tensors) {
      const TensorView to = layout.view(host.view(), layout.find(t.name));
      std::memcpy(to.data(), bytes.data() + o * static_cast<int64_t>(sizeof(float)), to.bytes());
      o += moment_slot(t.shape.numel());
    }
    copy(dst, host.view(), model.stream());
  }
  model.stream().synchronize();
}

}  // namespace tfm::train
