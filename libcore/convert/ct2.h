// A tfm checkpoint as a CTranslate2 Transformer model directory, written
// natively (no Python): what `tfm-convert --to ct2` writes. The directory
// holds what CTranslate2's own converters write for a TransformerSpec:
//
//   model.bin                 binary version 6: spec "TransformerSpec",
//                             revision 7; the variables sorted by name
//                             ("encoder/layer_0/ffn/linear_0/weight", ...),
//                             each with its shape, dtype and bytes; then the
//                             aliases (a variable equal to one earlier in
//                             name order is stored once, the later name
//                             pointing at it, as the spec API's optimize()
//                             does); the spec's attributes are variables too
//                             (num_heads int16, pre_norm int8, activation
//                             int8, alignment_layer/heads int16, ...)
//   config.json               the tokens that start, end and replace
//                             (decoder_start_token, eos_token, unk_token),
//                             add_source_eos, layer_norm_epsilon
//   shared_vocabulary.json    the token of every id (the source and target
//                             vocabularies are one in tfm)
//
// For the same checkpoint these are the bytes scripts/tfm-to-ct2 (the spec
// API) writes, where it supports the model.
//
// Every variant of ModelConfig maps onto CTranslate2's Transformer:
// encoder_layers / decoder_layers, pre_norm, layer_norm_eps, activation
// (relu, gelu: CTranslate2's exact GELU, silu: SWISH), scale_embeddings,
// share_embeddings, tie_output (the projection is its own matrix or an
// alias of the target embedding), output_bias (the projection's bias),
// decoder_start_id, eos_id and source_eos (config.json), and a head size
// other than d_model / heads (each attention's head_dim). Positions: tfm's
// own table (sinusoid_table: its layout and offset, max_positions rows) is
// written as CTranslate2's position encodings, since CTranslate2's built-in
// sinusoids are neither the paper's layout nor start at position 0; learned
// positions as they are. What CTranslate2 cannot represent is refused with
// one Error naming the checkpoint and the field: d_k != d_v (its attention
// has one head size).
#pragma once

#include <string>
#include <string_view>

#include "libcore/model/model_file.h"

namespace tfm::convert {

// How the weights are stored, as CTranslate2's converters' --quantization:
//   none      float32
//   int8      the matrices (linear and embedding weights) in int8 with one
//             float32 scale a row (127 / max |row|), the rest float32
//   int16     the matrices in int16 with one scale a matrix (2^10 / max |W|)
//   float16, bfloat16   every float tensor in that type (round to nearest even)
enum class Ct2Quantization { none, int8, int16, float16, bfloat16 };

// "none", "float32", "int8", "int16", "float16" or "bfloat16"; any other
// name throws Error listing these.
Ct2Quantization parse_ct2_quantization(std::string_view name);

struct Ct2Options {
  Ct2Quantization quantization = Ct2Quantization::none;
  // The tokens are the ids themselves ("4", "5", ...), the special ones
  // named "<unk>", "</s>" (eos_id), "<s>" (decoder_start_id, when not
  // eos_id) and "<pad>" (id 0, when none of these): for checkpoints without
  // a tokenizer and for feeding ids. Without it the tokens are the pieces of
  // the checkpoint's vocabulary (a SentencePiece model or a bundle), and a
  // checkpoint without one is refused.
  bool ids = false;
  // Replace an existing output directory. It must then be a CTranslate2
  // model directory (it holds model.bin) or empty: anything else is refused,
  // so a mistyped path never deletes a directory of other files.
  bool replace = false;
};

// Writes the model of `model` to the directory `dir`, atomically: the files
// go to a new directory DIR.tmp-XXXXXX beside it, each synced, which is then
// renamed to DIR (exchanged with the old DIR when replacing, which is then
// removed). An existing DIR without options.replace is refused; on an error
// nothing is left behind and an existing DIR is untouched. Throws Error:
// "CHECKPOINT: FIELD = VALUE cannot be represented in CTranslate2: WHY",
// or naming the directory when it cannot be written.
void write_ct2(const ModelFile& model, const std::string& dir, const Ct2Options& options);

}  // namespace tfm::convert
