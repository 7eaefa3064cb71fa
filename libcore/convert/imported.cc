#include "libcore/convert/imported.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "libcore/base/error.h"
#include "libcore/io/read_file.h"
#include "libcore/model/model_io.h"

namespace tfm::convert {

ImportedModel::ImportedModel(std::string origin, const ModelConfig& config)
    : origin_(std::move(origin)), weights_(std::make_unique<ModelWeights>(config, Device::cpu())),
      set_from_(weights_->layout().entries().size()) {
  const TensorView p = weights_->params();
  std::memset(p.data(), 0, p.bytes());
}

void ImportedModel::set(std::string_view name, const io::Array& array, std::string_view source, bool transposed,
                        int64_t rows) {
  const ParamLayout& layout = weights_->layout();
  const int id = layout.find(name);
  TFM_REQUIRE(id >= 0, "{}: its tensor '{}' has no place in tfm's model of its configuration", origin_, source);
  auto& from = set_from_[static_cast<size_t>(id)];
  TFM_REQUIRE(from.empty(), "{}: '{}' and '{}' both give tfm's {}", origin_, from, source, name);
  TFM_REQUIRE(io::is_float(array.type), "{}: '{}' holds {}, not floating-point weights", origin_, source,
              io::element_name(array.type));
  std::vector<int64_t> shape = array.shape;
  while (shape.size() > 1 && shape.front() == 1) shape.erase(shape.begin());
  const Shape want = layout.entry(id).shape;
  const int64_t out = want[0], in = want.rank() == 2 ? want[1] : 1;
  const int64_t taken = rows < 0 ? out : rows;
  std::vector<int64_t> expected = want.rank() == 2 ? std::vector<int64_t>{taken, in} : std::vector<int64_t>{taken};
  if (transposed && want.rank() == 2) std::swap(expected[0], expected[1]);
  if (shape != expected) {
    const auto text = [](const std::vector<int64_t>& s) {
      std::string t = "(";
      for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
      return t + ")";
    };
    fail("{}: '{}' is {}, but the model its configuration describes needs {} for {}", origin_, source,
         text(array.shape), text(expected), name);
  }
  const std::vector<float> values = array.to_f32();
  float* dst = layout.view(weights_->params(), id).data_as<float>();
  if (transposed && want.rank() == 2) {
    for (int64_t r = 0; r < taken; ++r)
      for (int64_t c = 0; c < in; ++c) dst[r * in + c] = values[static_cast<size_t>(c * taken + r)];
  } else {
    std::copy(values.begin(), values.end(), dst);
  }
  from = std::string(source);
}

bool ImportedModel::has(std::string_view name) const {
  const int id = weights_->layout().find(name);
  return id >= 0 && !set_from_[static_cast<size_t>(id)].empty();
}

void ImportedModel::save(const std::string& path, const Vocab& vocab) const {
  const ParamLayout& layout = weights_->layout();
  for (size_t id = 0; id < set_from_.size(); ++id)
    TFM_REQUIRE(!set_from_[id].empty(), "{} has no tensor for tfm's {}, which its configuration's model has",
                origin_, layout.entry(static_cast<int>(id)).name);
  TFM_REQUIRE(vocab.size() == config().vocab_size,
              "{}: its vocabulary has {} pieces, but its configuration says {}", origin_, vocab.size(),
              config().vocab_size);
  save_model(path, *weights_, vocab.bytes());
}

std::string describe(const ModelConfig& c) {
  return fmt::format("{} + {} layers, d_model {}, {} heads, d_ff {}, {}, {}", c.encoder_layers, c.decoder_layers,
                     c.d_model, c.heads, c.d_ff, activation_name(c.activation),
                     c.pre_norm ? "pre-norm" : "post-norm");
}

void refuse(std::string_view origin, std::string_view field, std::string_view value, std::string_view why) {
  fail("{}: {} = {} {}", origin, field, printable(value), why);
}

int64_t int_or(const io::Value& config, std::string_view key, int64_t fallback) {
  const io::Value* v = config.find(key);
  return v && !v->is_null() ? v->as_int() : fallback;
}
bool bool_or(const io::Value& config, std::string_view key, bool fallback) {
  const io::Value* v = config.find(key);
  return v && !v->is_null() ? v->as_bool() : fallback;
}
double float_or(const io::Value& config, std::string_view key, double fallback) {
  const io::Value* v = config.find(key);
  return v && !v->is_null() ? v->as_float() : fallback;
}

std::string string_or(const io::Value& config, std::string_view key, std::string fallback) {
  const io::Value* v = config.find(key);
  return v && !v->is_null() ? v->as_string() : fallback;
}

std::vector<std::string> pieces_by_id(const io::Value& map, const std::string& path, int64_t size) {
  std::vector<std::string> pieces(static_cast<size_t>(size));
  std::vector<bool> seen(pieces.size(), false);
  for (const auto& [key, value] : map.as_dict()) {
    const int64_t id = value.as_int();
    TFM_REQUIRE(id >= 0 && id < size, "{}: '{}' has id {}, outside the model's {} ids", path,
                printable(key.as_string()), id, size);
    TFM_REQUIRE(!seen[static_cast<size_t>(id)], "{}: id {} is given twice ('{}' and '{}')", path, id,
                printable(pieces[static_cast<size_t>(id)]), printable(key.as_string()));
    seen[static_cast<size_t>(id)] = true;
    pieces[static_cast<size_t>(id)] = key.as_string();
  }
  for (size_t id = 0; id < seen.size(); ++id)
    TFM_REQUIRE(seen[id], "{}: no piece has id {} (the model has {} ids)", path, id, size);
  return pieces;
}

std::string beside(const std::string& given, const std::string& dir, std::string_view name) {
  if (!given.empty()) return given;
  const std::filesystem::path p = std::filesystem::path(dir) / name;
  return std::filesystem::exists(p) ? p.string() : std::string();
}

Vocab bundle(const std::string& source_spm, const std::string& target_spm, std::vector<std::string> pieces,
             std::string_view origin) {
  TFM_REQUIRE(!source_spm.empty() && !target_spm.empty(),
              "{}: no SentencePiece models beside it (give --source-spm and --target-spm)",
              origin);
  return Vocab::from_parts(io::read_file(source_spm), io::read_file(target_spm), std::move(pieces),
                           fmt::format("{} (vocabulary)", origin));
}

}  // namespace tfm::convert
