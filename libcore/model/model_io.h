// A model to a checkpoint (libcore/io/checkpoint.h): the config as text,
// the embedded tokenizer, and every parameter by name. Reading one is a
// ModelFile's (model_file.h).
#pragma once

#include <span>
#include <string>

#include "libcore/io/checkpoint.h"
#include "libcore/model/transformer.h"

namespace tfm {

// Writes the parameters (copied to the host when the model is on a GPU).
void save_model(const std::string& path, const ModelWeights& model, std::string_view tokenizer = {},
                std::span<const io::NamedSection> sections = {});

}  // namespace tfm
