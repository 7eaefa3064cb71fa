#include "libcore/model/model_io.h"

#include <unordered_map>

namespace tfm {
namespace {

// The flat parameter buffer on the host: the buffer itself on the CPU, a
// staging copy for a GPU model.
Tensor host_params(const ModelWeights& model) {
  Tensor host(model.params().shape(), model.param_dtype());
  copy(host, model.params(), model.stream());
  return host;
}

}  // namespace

void save_model(const std::string& path, const ModelWeights& model, std::string_view tokenizer,
                std::span<const io::NamedSection> sections) {
  Tensor staging;
  TensorView flat = model.params();
  if (!model.device().is_cpu()) {
    staging = host_params(model);
    flat = staging.view();
  }
  std::vector<io::NamedTensor> tensors;
  for (size_t id = 0; id < model.layout().entries().size(); ++id)
    tensors.push_back({model.layout().entries()[id].name, model.layout().view(flat, static_cast<int>(id))});
  io::write_checkpoint(path, model.config().to_text(), tokenizer, tensors, sections);
}

ModelConfig read_model_config(const std::string& path) {
  return checked_model_config(path, io::read_checkpoint_info(path));
}

void load_parameters(const std::string& path, ModelWeights& model) {
  const io::CheckpointInfo info = io::read_checkpoint_info(path);
  ModelConfig c;
  c.parse(info.config, path + " (config)");
  TFM_REQUIRE(c == model.config(),
              "{} holds a model of another configuration than the one being loaded", path);
  const ParamLayout& layout = model.layout();
  std::unordered_map<std::string, int> wanted;
  for (size_t id = 0; id < layout.entries().size(); ++id) wanted[layout.entries()[id].name] = static_cast<int>(id);
  for (const io::TensorInfo& t : info.tensors) {
    const auto it = wanted.find(t.name);
    TFM_REQUIRE(it != wanted.end(), "{} has a tensor '{}' that the model does not have", path, printable(t.name));
    const ParamEntry& e = layout.entry(it->second);
    TFM_REQUIRE(t.shape == e.shape && t.dtype == model.param_dtype(),
                "{}: tensor '{}' is {} {} but the model needs {} {}", path, printable(t.name),
                dtype_name(t.dtype), t.shape.str(), dtype_name(model.param_dtype()), e.shape.str());
  }
  for (const ParamEntry& e : layout.entries())
    TFM_REQUIRE(info.find(printable(e.name)), "{} has no tensor '{}'", path, printable(e.name));

  Tensor staging;
  TensorView flat = model.params();
  if (!model.device().is_cpu()) {
    staging = Tensor(flat.shape(), model.param_dtype());
    flat = staging.view();
  }
  io::read_checkpoint_tensors(path, [&](const io::TensorInfo& t) {
    const TensorView v = layout.view(flat, wanted.at(t.name));
    return std::span<std::byte>(static_cast<std::byte*>(v.data()), v.bytes());
  });
  if (!model.device().is_cpu()) copy(model.params(), flat, model.stream());
}

std::unique_ptr<Transformer> load_model(const std::string& path, const ModelLimits& limits,
                                        Device device, std::string* tokenizer, DType dtype) {
  auto model = std::make_unique<Transformer>(read_model_config(path), limits, device, dtype);
  load_parameters(path, *model);
  model->refresh_weights();
  if (tokenizer) *tokenizer = io::read_checkpoint_tokenizer(path);
  return model;
}

std::unique_ptr<ModelWeights> load_weights(const std::string& path, Device device, std::string* tokenizer,
                                           DType dtype) {
  auto weights = std::make_unique<ModelWeights>(read_model_config(path), device, dtype);
  load_parameters(path, *weights);
  weights->refresh_weights();
  if (tokenizer) *tokenizer = io::read_checkpoint_tokenizer(path);
  return weights;
}

}  // namespace tfm
