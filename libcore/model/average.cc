#include "libcore/model/average.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <unordered_map>

#include "libcore/base/error.h"
#include "libcore/base/log.h"
#include "libcore/base/progress.h"
#include "libcore/io/key_value.h"
#include "libcore/model/model_check.h"
#include "libcore/model/model_file.h"

namespace tfm {
namespace fs = std::filesystem;
using namespace io;  // the checkpoint format's names

namespace {

std::optional<int64_t> parse_step(std::string_view digits) {
  int64_t v = -1;
  const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || p != digits.data() + digits.size() || v < 0) return std::nullopt;
  return v;
}

// The STEP of ".../checkpoint_<STEP>.bin".
std::optional<int64_t> step_of_name(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  constexpr std::string_view prefix = "checkpoint_", suffix = ".bin";
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) ||
      !name.ends_with(suffix))
    return std::nullopt;
  return parse_step(std::string_view(name).substr(
      prefix.size(), name.size() - prefix.size() - suffix.size()));
}

// The "step = N" line of a training state, read by the rules of every
// key = value text (key_value.h); the rest of the state is tfm-train's
// (train::TrainState), which this layer does not need.
int64_t step_of_state(std::string_view text, const std::string& path) {
  std::optional<int64_t> step;
  for_each_key_value(text, path, [&](std::string_view key, std::string_view value) {
    if (key != "step") return;
    step = parse_step(value);
    if (!step) fail("{}: its training state has a step that is not a count: '{}'", path, printable(value));
  });
  if (!step) fail("{}: its training state has no step", path);
  return *step;
}

bool has_section(const CheckpointInfo& info, std::string_view name) {
  return std::any_of(info.sections.begin(), info.sections.end(), [&](const SectionInfo& s) {
    return s.kind == SectionKind::extra && s.name == name;
  });
}

std::optional<int64_t> step_of(const CheckpointReader& checkpoint) {
  const std::string& path = checkpoint.path();
  if (has_section(checkpoint.info(), kTrainingStateSection))
    return step_of_state(checkpoint.section(kTrainingStateSection), path);
  return step_of_name(path);
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  for (size_t pos = 0; pos < text.size();) {
    const size_t nl = std::min(text.find('\n', pos), text.size());
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

// Configuration keys that shape training, not the weights: checkpoints that
// differ in them average as well as any (the output keeps the first's).
constexpr std::string_view kTrainingOnlyKeys[] = {"dropout", "attention_dropout", "label_smoothing"};

std::string_view key_of(std::string_view line) { return trim(line.substr(0, line.find('='))); }

bool training_only(std::string_view line) {
  return std::find(std::begin(kTrainingOnlyKeys), std::end(kTrainingOnlyKeys), key_of(line)) !=
         std::end(kTrainingOnlyKeys);
}

// Error unless `path` holds the same model as `ref_path`: configuration
// (but its training-only keys, a note where they differ), tokenizer, and
// every tensor's name, dtype and shape.
void check_same_model(const std::string& ref_path, const CheckpointInfo& ref,
                      const std::string& ref_tokenizer, const CheckpointReader& reader,
                      const std::string& tokenizer) {
  const std::string& path = reader.path();
  const CheckpointInfo& info = reader.info();
  if (info.config != ref.config) {
    const auto a = lines_of(ref.config), b = lines_of(info.config);
    std::vector<std::string> notes;
    size_t i = 0;
    for (; i < a.size() && i < b.size(); ++i) {
      if (a[i] == b[i]) continue;
      if (!training_only(a[i]) || key_of(a[i]) != key_of(b[i])) break;
      notes.push_back(fmt::format("'{}' where {} has '{}'", b[i], ref_path, a[i]));
    }
    if (i < a.size() || i < b.size())
      fail("{} holds another configuration than {}: {} where {} has {}", path, ref_path,
           i < b.size() ? fmt::format("'{}'", b[i]) : "nothing", ref_path,
           i < a.size() ? fmt::format("'{}'", a[i]) : "nothing");
    for (const std::string& note : notes)
      log::info("{}: {}: a training setting, not the weights'; the average keeps the first's", path, note);
  }
  if (tokenizer != ref_tokenizer)
    fail("{} holds another vocabulary (embedded tokenizer) than {}", path, ref_path);
  for (const TensorInfo& r : ref.tensors) {
    const TensorInfo* t = info.find(r.name);
    if (t == nullptr) fail("{} has no tensor '{}', which {} has", path, printable(r.name), ref_path);
    if (t->dtype != r.dtype || t->shape != r.shape)
      fail("{}: tensor '{}' is {} {}, but {} {} in {}", path, printable(r.name), dtype_name(t->dtype),
           t->shape.str(), dtype_name(r.dtype), r.shape.str(), ref_path);
  }
  for (const TensorInfo& t : info.tensors)
    if (ref.find(t.name) == nullptr)
      fail("{} has a tensor '{}' that {} does not have", path, printable(t.name), ref_path);
}

double load(DType dtype, const std::byte* p) {
  switch (dtype) {
    case DType::f32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::f64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::bf16: { bf16 v; std::memcpy(&v.bits, p, 2); return static_cast<float>(v); }
    case DType::f16: { f16 v; std::memcpy(&v.bits, p, 2); return static_cast<float>(v); }
    case DType::i32: break;
  }
  fail("internal: no average of {} tensors", dtype_name(dtype));
}

// bf16 and f16 round through f32: exact for a mean of equal values, within
// one unit of their last place otherwise.
void store(DType dtype, double v, std::byte* p) {
  switch (dtype) {
    case DType::f32: { const auto f = static_cast<float>(v); std::memcpy(p, &f, 4); return; }
    case DType::f64: std::memcpy(p, &v, 8); return;
    case DType::bf16: { const bf16 h(static_cast<float>(v)); std::memcpy(p, &h.bits, 2); return; }
    case DType::f16: { const f16 h(static_cast<float>(v)); std::memcpy(p, &h.bits, 2); return; }
    case DType::i32: break;
  }
  fail("internal: no average of {} tensors", dtype_name(dtype));
}

// Adds one checkpoint's tensor data into the float64 accumulator as its
// pieces arrive (the first input assigns), joining elements that straddle
// two pieces. f64 tensors (tests) keep a running mean instead, which float64
// holds for k equal values where their sum it might not.
class Summer {
 public:
  // `count`: this input is the count-th (1-based).
  Summer(std::vector<double>& acc, size_t count) : acc_(acc), count_(static_cast<double>(count)) {}

  // `base`: the tensor's first element in the accumulator.
  void piece(uint64_t base, DType dtype, uint64_t offset, std::span<const std::byte> bytes) {
    if (bytes.empty()) return;  // an empty tensor
    const size_t es = dtype_size(dtype);
    uint64_t e = base + offset / es;
    const size_t in = static_cast<size_t>(offset % es);
    size_t pos = 0;
    if (in != 0) {  // finish the element the last piece began
      pos = std::min(es - in, bytes.size());
      std::memcpy(carry_ + in, bytes.data(), pos);
      if (in + pos < es) return;
      add(e++, load(dtype, carry_), dtype == DType::f64);
    }
    for (; pos + es <= bytes.size(); pos += es)
      add(e++, load(dtype, bytes.data() + pos), dtype == DType::f64);
    std::memcpy(carry_, bytes.data() + pos, bytes.size() - pos);
  }

 private:
  void add(uint64_t i, double v, bool mean) {
    double& a = acc_[static_cast<size_t>(i)];
    if (count_ == 1) a = v;
    else if (!mean) a += v;
    else if (v != a) a += (v - a) / count_;  // equal values keep the mean as it is (-0 too)
  }
  std::vector<double>& acc_;
  double count_;
  std::byte carry_[8] = {};
};

}  // namespace

std::optional<int64_t> checkpoint_step(const std::string& path) {
  return step_of(CheckpointReader(path));
}

std::vector<std::string> newest_checkpoints(const std::string& dir, int64_t n) {
  TFM_REQUIRE(n >= 1, "--last takes at least 1 checkpoint, not {}", n);
  std::error_code ec;
  TFM_REQUIRE(fs::is_directory(dir, ec), "{} is not a directory", dir);
  std::vector<std::string> files;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec))
    if (it->is_regular_file() && it->path().filename().string().find(".tmp.") == std::string::npos &&
        is_checkpoint(it->path().string()))
      files.push_back(it->path().string());
  if (ec) fail("cannot list {}: {}", dir, ec.message());
  std::sort(files.begin(), files.end());
  std::map<int64_t, std::string> by_step;
  for (const std::string& f : files) {
    const std::optional<int64_t> step = checkpoint_step(f);
    if (!step) {
      log::debug("{}: no training step, left out", f);
      continue;
    }
    auto [it, fresh] = by_step.emplace(*step, f);
    if (!fresh && step_of_name(f) == step) it->second = f;  // the numbered name wins
  }
  TFM_REQUIRE(static_cast<int64_t>(by_step.size()) >= n,
              "{} holds {} checkpoint{} with a training step, fewer than the {} asked for", dir,
              by_step.size(), by_step.size() == 1 ? "" : "s", n);
  std::vector<std::string> out;
  for (auto it = std::prev(by_step.end(), n);; ++it) {
    out.push_back(it->second);
    if (std::next(it) == by_step.end()) break;
  }
  return out;
}

AverageReport average_checkpoints(const std::vector<std::string>& inputs,
                                  const std::string& output, const AverageOptions& options) {
  TFM_REQUIRE(!inputs.empty(), "no checkpoints to average");
  // Every input opened once, held open to the end (its tensors, its
  // sections), its tokenizer read once.
  std::vector<CheckpointReader> readers;
  std::vector<std::string> tokenizers;
  for (const std::string& path : inputs) {
    const CheckpointReader& r = readers.emplace_back(path);
    tokenizers.push_back(r.tokenizer());
    if (options.check_model) checked_model_vocab(path, tokenizers.back(), checked_model_config(path, r.info()));
  }
  const std::string& ref_path = inputs[0];
  const CheckpointInfo& ref = readers[0].info();
  const std::string& tokenizer = tokenizers[0];
  for (size_t i = 1; i < inputs.size(); ++i)
    check_same_model(ref_path, ref, tokenizer, readers[i], tokenizers[i]);

  // Each tensor's place in the accumulator, in the first input's order.
  AverageReport report;
  std::unordered_map<std::string, size_t> index;
  std::vector<uint64_t> base;
  for (const TensorInfo& t : ref.tensors) {
    TFM_REQUIRE(t.dtype != DType::i32,
                "{}: tensor '{}' holds integers (i32); only floating-point tensors can be averaged",
                ref_path, printable(t.name));
    index.emplace(t.name, base.size());
    base.push_back(static_cast<uint64_t>(report.elements));
    report.elements += t.shape.numel();
  }
  report.tensors = static_cast<int64_t>(ref.tensors.size());

  std::vector<double> acc(static_cast<size_t>(report.elements));  // (sum of every tensor's numel)
  Progress* progress = options.progress;
  const double all = static_cast<double>(report.elements) * static_cast<double>(inputs.size());
  double added = 0;  // elements summed so far, over all inputs
  for (size_t k = 0; k < inputs.size(); ++k) {
    Summer sum(acc, k + 1);
    readers[k].stream_tensors([&](const TensorInfo& t, uint64_t offset, std::span<const std::byte> bytes) {
      // The open file streams by the table check_same_model saw.
      sum.piece(base[index.at(t.name)], t.dtype, offset, bytes);
      added += static_cast<double>(bytes.size() / dtype_size(t.dtype));
      if (progress && progress->due())
        progress->report(fmt::format("checkpoint {} of {}: {} | {:.0f}% | ETA {}", k + 1, inputs.size(),
                                     inputs[k], 100 * added / all,
                                     format_eta(eta_seconds(added, all, progress->seconds()))),
                         true);
    });
    log::debug("{}: added ({} of {})", inputs[k], k + 1, inputs.size());
  }

  // The means, rounded in place: element e of a tensor goes to byte e * size
  // of its accumulator span, at or before the double it is computed from.
  auto* raw = reinterpret_cast<std::byte*>(acc.data());
  const auto count = static_cast<double>(inputs.size());
  std::vector<NamedTensor> tensors;
  for (size_t j = 0; j < ref.tensors.size(); ++j) {
    const TensorInfo& t = ref.tensors[j];
    std::byte* out = raw + base[j] * sizeof(double);
    const size_t es = dtype_size(t.dtype);
    for (int64_t e = 0; e < t.shape.numel(); ++e) {
      double sum;
      std::memcpy(&sum, out + static_cast<size_t>(e) * sizeof(double), sizeof(double));
      store(t.dtype, t.dtype == DType::f64 ? sum : sum / count, out + static_cast<size_t>(e) * es);
    }
    tensors.push_back({t.name, TensorView(out, t.dtype, t.shape)});
  }

  std::vector<NamedSection> sections;
  if (options.keep_state) {
    size_t newest = 0;
    int64_t newest_step = -1;
    for (size_t k = 0; k < inputs.size(); ++k) {
      const int64_t step = step_of(readers[k]).value_or(-1);
      if (step >= newest_step) newest = k, newest_step = step;
    }
    report.newest = inputs[newest];
    const CheckpointReader& reader = readers[newest];
    for (const SectionInfo& s : reader.info().sections) {
      if (s.kind != SectionKind::extra) continue;
      const std::string name = s.name;
      sections.emplace_back(name, s.raw_bytes, [&reader, name](const ByteSink& sink) {
        reader.stream_section(name, sink);
      });
      report.sections.push_back(name);
    }
    TFM_REQUIRE(!sections.empty(), "{}, the newest input, holds no training state to keep",
                report.newest);
  }
  if (progress) progress->report(fmt::format("writing {}", output));
  write_checkpoint(output, ref.config, tokenizer, tensors, sections, options.write);
  if (progress) progress->end_live();
  return report;
}

}  // namespace tfm
