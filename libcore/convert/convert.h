// Models of other toolkits as tfm checkpoints (tfm-convert): their
// configuration mapped onto ModelConfig's fields (the variants of
// config.h), their tensors renamed into tfm's layout (params.h), their
// vocabulary and SentencePiece models into one embedded Vocab
// (data/vocab.h).
//
// Sources:
//   hf      a Hugging Face MarianMTModel directory: config.json,
//           model.safetensors or pytorch_model.bin, vocab.json, source.spm
//           and target.spm (OPUS-MT's models as transformers publishes them)
//   marian  a Marian model: the .npz with its special:model.yml, the
//           vocabulary (.yml or .json) and OPUS-MT's source.spm / target.spm
//   fairseq a fairseq transformer checkpoint (.pt), its dict.SRC.txt and
//           dict.TGT.txt (one joined dictionary) and its SentencePiece model
// and the other way, a tfm checkpoint as a CTranslate2 model directory
// (to = ct2; ct2.h).
//
// Whatever a source model uses that tfm cannot represent (another
// activation, separate source and target vocabularies, heads of different
// counts in the encoder and the decoder, ...) is refused with one Error
// naming the field and its value; nothing is written then.
#pragma once

#include <cstdint>
#include <string>

#include "libcore/convert/ct2.h"

namespace tfm::convert {

struct ConvertOptions {
  std::string input;       // a directory (hf) or a file (marian .npz, fairseq .pt)
  std::string output;      // the tfm checkpoint, written atomically
  std::string from = "auto";  // auto | hf | marian | fairseq
  std::string vocab;       // the vocabulary file ("": found beside input)
  std::string source_spm;  // "": source.spm beside input
  std::string target_spm;  // "": target.spm beside input
  std::string to = "tfm";  // tfm | ct2 (input: a tfm checkpoint; output: a directory)
  Ct2Options ct2;          // to = ct2
};

struct ConvertReport {
  std::string origin;        // "the Hugging Face Marian model in DIR"
  std::string architecture;  // "6 + 6 layers, d_model 512, silu, ..."
  int64_t parameters = 0;
  int64_t vocab_size = 0;
};

ConvertReport convert_model(const ConvertOptions& options);

}  // namespace tfm::convert
