#include "libcore/model/model_file.h"

#include "libcore/model/model_check.h"

namespace tfm {

ModelFile::ModelFile(io::CheckpointReader reader)
    : reader_(std::move(reader)),
      config_(checked_model_config(reader_.path(), reader_.info())),
      vocab_(checked_model_vocab(reader_.path(), reader_.tokenizer(), config_)) {}

void ModelFile::load_parameters(ModelWeights& model) const {
  TFM_REQUIRE(config_ == model.config(),
              "{} holds a model of another configuration than the one being loaded", path());
  // The table is the layout's (checked on opening); the dtype is the model's.
  const ParamLayout& layout = model.layout();
  for (const io::TensorInfo& t : reader_.info().tensors)
    TFM_REQUIRE(t.dtype == model.param_dtype(), "{}: tensor '{}' is {} {} but the model needs {} {}",
                path(), printable(t.name), dtype_name(t.dtype), t.shape.str(),
                dtype_name(model.param_dtype()), t.shape.str());
  Tensor staging;
  TensorView flat = model.params();
  if (!model.device().is_cpu()) {
    staging = Tensor(flat.shape(), model.param_dtype());
    flat = staging.view();
  }
  reader_.read_tensors([&](const io::TensorInfo& t) {
    const TensorView v = layout.view(flat, layout.find(t.name));
    return std::span<std::byte>(static_cast<std::byte*>(v.data()), v.bytes());
  });
  if (!model.device().is_cpu()) copy(model.params(), flat, model.stream());
}

namespace {

// The parameters read, and the copy `precision` computes from made.
void load_for(const ModelFile& file, ModelWeights& model, Precision precision) {
  file.load_parameters(model);
  model.refresh_weights();
  if (precision == Precision::int8) model.quantize_int8();
}

}  // namespace

std::unique_ptr<Transformer> ModelFile::load_model(const ModelLimits& limits, Device device,
                                                   Precision precision) const {
  auto model = std::make_unique<Transformer>(config_, limits, device, compute_dtype(precision));
  load_for(*this, *model, precision);
  return model;
}

std::unique_ptr<ModelWeights> ModelFile::load_weights(Device device, Precision precision) const {
  auto weights = std::make_unique<ModelWeights>(config_, device, compute_dtype(precision));
  load_for(*this, *weights, precision);
  return weights;
}

}  // namespace tfm
