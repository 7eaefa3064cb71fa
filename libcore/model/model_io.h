// A model to and from a checkpoint (libcore/io/checkpoint.h): the config as
// text, the embedded tokenizer, and every parameter by name. Loading checks
// the file against the model it describes: every parameter present with
// its shape and dtype, no tensor the model does not know.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "libcore/io/checkpoint.h"
#include "libcore/model/model_check.h"
#include "libcore/model/transformer.h"

namespace tfm {

// Writes the parameters (copied to the host when the model is on a GPU).
void save_model(const std::string& path, const ModelWeights& model, std::string_view tokenizer = {},
                std::span<const io::NamedSection> sections = {});

// The configuration a checkpoint was written with, checked by
// checked_model_config (model_check.h).
ModelConfig read_model_config(const std::string& path);

// Builds the model the checkpoint describes, with `limits` on `device`
// computing in `dtype` (Transformer), and loads its parameters (and the
// 16-bit copy, if any). `tokenizer` (optional) receives the embedded model.
std::unique_ptr<Transformer> load_model(const std::string& path, const ModelLimits& limits,
                                        Device device, std::string* tokenizer = nullptr,
                                        DType dtype = DType::f32);

// The weights alone, for decoding (ModelWeights: no training or scoring
// memory), loaded and their compute copy refreshed.
std::unique_ptr<ModelWeights> load_weights(const std::string& path, Device device,
                                           std::string* tokenizer = nullptr, DType dtype = DType::f32);

// Loads parameters into an existing model (or weights) of the same configuration.
void load_parameters(const std::string& path, ModelWeights& model);

}  // namespace tfm
