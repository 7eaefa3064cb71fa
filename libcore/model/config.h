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

namespace tfm {

struct ModelConfig {
  int64_t vocab_size = 37000;   // V, shared source-target vocabulary
  int64_t layers = 6;           // N, in the encoder and in the decoder
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

  // "base", "big" (the paper's Table 3) or "tiny" (for tests). Throws for any
  // other name, listing the known ones.
  static ModelConfig preset(std::string_view name);

  // Parses the text form on top of *this (so a preset can be overridden).
  void parse(std::string_view text, std::string_view source = "config");
  // Sets one key from its text value (the same rules as parse).
  void set(std::string_view key, std::string_view value);
  std::string to_text() const;

  // Throws Error for inconsistent values (d_model odd with sinusoids, ...).
  void validate() const;

  // The closed-form parameter count (as the paper counts: the shared embedding once).
  int64_t parameter_count() const;

  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

}  // namespace tfm
