#include "libcore/model/model_io.h"


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

}  // namespace tfm
