// The model's configuration: every knob of the paper's Table 3, presets,
// and the text form stored in checkpoints and accepted by --config.
//
// Text form: one "key = value" per line, '#' starts a comment; the keys are
// the field names below. Reading is strict: an unknown key, a bad value or a
// value out of range is one Error naming the key.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/elementwise.h"  // ops::Activation

namespace tfm {

// How the sinusoidal position table lays out its sines and cosines.
//   interleaved  PE(p, 2i) = sin(p w_i), PE(p, 2i + 1) = cos(p w_i),
//                w_i = 10000^(-2i / D)                  (the paper; tfm's own)
//   halves       PE(p, i) = sin(p w_i), PE(p, D/2 + i) = cos(p w_i), the same
//                w_i                                     (Marian, Hugging Face Marian)
//   fairseq      halves, with w_i = 10000^(-i / (D/2 - 1))  (fairseq, FSMT)
// p runs from position_offset (fairseq starts at 2: its padding id + 1).
enum class PositionLayout : uint8_t { interleaved, halves, fairseq };

// "relu", "gelu", "silu": the names of the configuration's text form.
std::string_view activation_name(ops::Activation a);

struct ModelConfig {
  int64_t vocab_size = 37000;   // V, shared source-target vocabulary
  int64_t encoder_layers = 6;   // N of the encoder ("layers" sets both depths)
  int64_t decoder_layers = 6;   // N of the decoder
  int64_t d_model = 512;        // D
  int64_t d_ff = 2048;          // F
  int64_t heads = 8;            // H
  int64_t d_k = 64;             // K, per head (independent of d_model / h: row B)
  int64_t d_v = 64;             // E, per head
  float dropout = 0.1f;         // P_drop: sub-layer outputs, embeddings + positions
  float attention_dropout = 0.0f;  // on the attention weights (parsing experiments)
  float label_smoothing = 0.1f; // eps_ls
  bool learned_positions = false;  // Table 3 row E; sinusoidal otherwise
  int64_t max_positions = 1024; // longest sentence the position table covers
  bool share_embeddings = true; // one matrix: source, target and pre-softmax
  bool pre_norm = false;        // x + Sublayer(LN(x)) instead of LN(x + Sublayer(x))
  float layer_norm_eps = 1e-5f;
  // The variants of models made elsewhere (tfm-convert); the defaults are
  // the paper's model, which tfm trains.
  ops::Activation activation = ops::Activation::relu;  // the feed-forward's
  bool scale_embeddings = true; // embeddings times sqrt(D) before the positions are added
  PositionLayout position_layout = PositionLayout::interleaved;
  int64_t position_offset = 0;  // the first position's row of the sinusoid table
  bool tie_output = true;       // pre-softmax weights = the target embedding; else their own
  bool output_bias = false;     // a bias on the logits (Marian's final_logits_bias)
  int64_t decoder_start_id = 2; // the decoder's first input (tfm: <s>; Marian: <pad>; fairseq: </s>)
  int64_t eos_id = 3;           // ends every target sentence (and source, with source_eos)
  bool source_eos = false;      // sources end with eos (Marian, fairseq) or not (tfm)

  // "base", "big" (the paper's Table 3) or "tiny" (for tests). Throws for any
  // other name, listing the known ones.
  static ModelConfig preset(std::string_view name);

  // Parses the text form on top of *this (so a preset can be overridden).
  void parse(std::string_view text, std::string_view source = "config");
  // Sets one key from its text value (the same rules as parse).
  void set(std::string_view key, std::string_view value);
  std::string to_text() const;

  // Throws Error for inconsistent values (d_model odd with sinusoids, an id
  // past the vocabulary, ...).
  void validate() const;

  // The closed-form parameter count (as the paper counts: the shared embedding once).
  int64_t parameter_count() const;

  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

}  // namespace tfm
