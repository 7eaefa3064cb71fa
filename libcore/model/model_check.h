// The one validation of a model checkpoint, which every reader of one
// applies (ModelFile, model_file.h, on opening; tfm-avgckpt to each input)
// so that no program accepts a file another refuses. Apart from
// ModelFile so that it needs no model code (the fuzz target of the
// checkpoint reader links it alone).
#pragma once

#include <memory>
#include <string>

#include "libcore/data/vocab.h"
#include "libcore/io/checkpoint.h"
#include "libcore/model/config.h"

namespace tfm {

// The configuration parses within every knob's range and is consistent
// (ModelConfig::validate); the tensor table is exactly the layout that
// configuration makes (every name, every shape, a floating-point dtype).
// Returns the configuration; one Error naming the file and what disagrees
// otherwise.
ModelConfig checked_model_config(const std::string& path, const io::CheckpointInfo& info);

// The embedded vocabulary, `tokenizer` (the checkpoint's bytes, empty when
// it has none): a SentencePiece model of `config`'s vocab_size pieces.
// Returns it, parsed (null when there is none).
std::unique_ptr<Vocab> checked_model_vocab(const std::string& path, std::string tokenizer,
                                           const ModelConfig& config);

}  // namespace tfm
