#include "libcore/model/model_check.h"

#include <string_view>
#include <unordered_map>

#include "libcore/base/error.h"
#include "libcore/data/vocab.h"
#include "libcore/model/params.h"

namespace tfm {

ModelConfig checked_model_config(const std::string& path, const io::CheckpointInfo& info) {
  ModelConfig c;
  c.parse(info.config, path + " (config)");
  c.validate();
  const ParamLayout layout(c);
  std::unordered_map<std::string_view, int> ids;
  for (size_t id = 0; id < layout.entries().size(); ++id) ids.emplace(layout.entries()[id].name, static_cast<int>(id));
  for (const io::TensorInfo& t : info.tensors) {
    const auto found = ids.find(t.name);
    const int id = found == ids.end() ? -1 : found->second;
    TFM_REQUIRE(id >= 0, "{} has a tensor '{}' that its configuration's model does not have", path,
                printable(t.name));
    const ParamEntry& e = layout.entry(id);
    TFM_REQUIRE(t.shape == e.shape,
                "{}: tensor '{}' is {}, but its configuration (vocab_size = {}, d_model = {}, ...) "
                "makes it {}",
                path, printable(t.name), t.shape.str(), c.vocab_size, c.d_model, e.shape.str());
    TFM_REQUIRE(t.dtype == DType::f32 || t.dtype == DType::bf16 || t.dtype == DType::f16 ||
                    t.dtype == DType::f64,
                "{}: tensor '{}' holds {}, not floating-point parameters", path, printable(t.name),
                dtype_name(t.dtype));
  }
  // The table's names are unique (the reader checks): as many as the layout's, all found.
  if (info.tensors.size() != layout.entries().size()) {
    std::unordered_map<std::string_view, int> have;
    for (const io::TensorInfo& t : info.tensors) have.emplace(t.name, 0);
    for (const ParamEntry& e : layout.entries())
      TFM_REQUIRE(have.count(e.name), "{} has no tensor '{}', which its configuration's model has",
                  path, e.name);
  }
  return c;
}

std::unique_ptr<Vocab> checked_model_vocab(const std::string& path, std::string tokenizer,
                                           const ModelConfig& config) {
  if (tokenizer.empty()) return nullptr;
  auto vocab = std::make_unique<Vocab>(Vocab::from_bytes(std::move(tokenizer), path + " (its embedded vocabulary)"));
  TFM_REQUIRE(vocab->size() == config.vocab_size,
              "vocabulary mismatch: {} embeds a {} of {} pieces ({}), but its "
              "configuration says vocab_size = {}",
              path, vocab->is_bundle() ? "vocabulary bundle" : "SentencePiece model", vocab->size(),
              vocab->fingerprint(), config.vocab_size);
  return vocab;
}

}  // namespace tfm
