// Internal to libcore/convert: the readers of each source (convert.h), each
// giving the model and its vocabulary, checked, for convert_model to write.
#pragma once

#include "libcore/convert/convert.h"
#include "libcore/convert/imported.h"

namespace tfm::convert {

struct Converted {
  ImportedModel model;
  Vocab vocab;
};

// A Hugging Face MarianMTModel directory (hf.cc).
Converted read_hf(const ConvertOptions& options);
// A Marian .npz, its vocabulary and SentencePiece models (marian.cc).
Converted read_marian(const ConvertOptions& options);
// A fairseq transformer checkpoint (.pt), its dictionaries and SentencePiece
// model (fairseq.cc).
Converted read_fairseq(const ConvertOptions& options);

}  // namespace tfm::convert
