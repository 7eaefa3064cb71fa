#include "libcore/model/config.h"

#include <initializer_list>
#include <utility>

#include "libcore/base/error.h"
#include "libcore/base/range.h"
#include "libcore/io/key_value.h"

namespace tfm {
namespace {

// Values of the text form, checked; errors say "config: KEY must be ...".
int64_t parse_int(std::string_view key, std::string_view v, int64_t lo, int64_t hi) {
  return io::parse_int(fmt::format("config: {}", key), v, lo, hi);
}
float parse_float(std::string_view key, std::string_view v, double lo, double hi) {
  return static_cast<float>(io::parse_double(fmt::format("config: {}", key), v, lo, hi));
}
bool parse_bool(std::string_view key, std::string_view v) {
  return io::parse_bool(fmt::format("config: {}", key), v);
}

// The names of an enum's values, in its order.
template <typename E>
struct Names {
  std::initializer_list<std::pair<E, std::string_view>> list;
  std::string_view operator()(E e) const {
    for (const auto& [value, name] : list)
      if (value == e) return name;
    return "?";
  }
};
const Names<ops::Activation> kActivations{
    {{ops::Activation::relu, "relu"}, {ops::Activation::gelu, "gelu"}, {ops::Activation::silu, "silu"}}};
const Names<PositionLayout> kPositionLayouts{{{PositionLayout::interleaved, "interleaved"},
                                              {PositionLayout::halves, "halves"},
                                              {PositionLayout::fairseq, "fairseq"}}};

}  // namespace

std::string_view activation_name(ops::Activation a) { return kActivations(a); }

namespace {

template <typename E>
E parse_choice(std::string_view key, std::string_view v, const Names<E>& names) {
  std::string known;
  for (const auto& [value, name] : names.list) {
    if (name == v) return value;
    known += known.empty() ? std::string(name) : fmt::format(", {}", name);
  }
  fail("config: {} must be one of {}, got '{}'", key, known, printable(v));
}

}  // namespace

ModelConfig ModelConfig::preset(std::string_view name) {
  ModelConfig c;  // the defaults are `base`
  if (name == "base") return c;
  if (name == "big") {
    c.d_model = 1024;
    c.d_ff = 4096;
    c.heads = 16;
    c.dropout = 0.3f;
    return c;
  }
  if (name == "tiny") {
    c.vocab_size = 64;
    c.encoder_layers = c.decoder_layers = 2;
    c.d_model = 32;
    c.d_ff = 64;
    c.heads = 4;
    c.d_k = 8;
    c.d_v = 8;
    c.max_positions = 256;
    return c;
  }
  fail("unknown preset '{}': expected base, big or tiny", name);
}

void ModelConfig::set(std::string_view key, std::string_view v) {
  constexpr int64_t kBig = int64_t(1) << 31;
  if (key == "vocab_size") vocab_size = parse_int(key, v, 2, kBig);
  else if (key == "layers") encoder_layers = decoder_layers = parse_int(key, v, 1, 1024);
  else if (key == "encoder_layers") encoder_layers = parse_int(key, v, 1, 1024);
  else if (key == "decoder_layers") decoder_layers = parse_int(key, v, 1, 1024);
  else if (key == "d_model") d_model = parse_int(key, v, 1, 1 << 20);
  else if (key == "d_ff") d_ff = parse_int(key, v, 1, 1 << 22);
  else if (key == "heads") heads = parse_int(key, v, 1, 1024);
  else if (key == "d_k") d_k = parse_int(key, v, 1, 1 << 16);
  else if (key == "d_v") d_v = parse_int(key, v, 1, 1 << 16);
  else if (key == "dropout") dropout = parse_float(key, v, 0, 0.99);
  else if (key == "attention_dropout") attention_dropout = parse_float(key, v, 0, 0.99);
  else if (key == "label_smoothing") {
    // Below 1: at 1 the target is the uniform distribution and nothing is learned.
    const float x = parse_float(key, v, 0, 1);
    if (x >= 1) fail("config: label_smoothing must be below 1, got {}", plain_number(x));
    label_smoothing = x;
  }
  else if (key == "learned_positions") learned_positions = parse_bool(key, v);
  else if (key == "max_positions") max_positions = parse_int(key, v, 1, 1 << 20);
  else if (key == "share_embeddings") share_embeddings = parse_bool(key, v);
  else if (key == "pre_norm") pre_norm = parse_bool(key, v);
  else if (key == "layer_norm_eps") layer_norm_eps = parse_float(key, v, 1e-12, 1);
  else if (key == "activation") activation = parse_choice(key, v, kActivations);
  else if (key == "scale_embeddings") scale_embeddings = parse_bool(key, v);
  else if (key == "position_layout") position_layout = parse_choice(key, v, kPositionLayouts);
  else if (key == "position_offset") position_offset = parse_int(key, v, 0, 1 << 20);
  else if (key == "tie_output") tie_output = parse_bool(key, v);
  else if (key == "output_bias") output_bias = parse_bool(key, v);
  else if (key == "decoder_start_id") decoder_start_id = parse_int(key, v, 0, kBig);
  else if (key == "eos_id") eos_id = parse_int(key, v, 0, kBig);
  else if (key == "source_eos") source_eos = parse_bool(key, v);
  else fail("config: unknown key '{}'", printable(key));
}

void ModelConfig::parse(std::string_view text, std::string_view source) {
  io::for_each_key_value(text, source, [&](std::string_view key, std::string_view value) {
    set(key, value);
  });
}

// One depth is written as `layers`, as every checkpoint before the two
// depths were; the variants' keys only where they differ from the paper's
// model, so that tfm's own configurations read as they always have.
std::string ModelConfig::to_text() const {
  std::string depth = encoder_layers == decoder_layers
                          ? fmt::format("layers = {}\n", encoder_layers)
                          : fmt::format("encoder_layers = {}\ndecoder_layers = {}\n", encoder_layers, decoder_layers);
  std::string text = fmt::format(
      "vocab_size = {}\n{}d_model = {}\nd_ff = {}\nheads = {}\nd_k = {}\nd_v = {}\n"
      "dropout = {}\nattention_dropout = {}\nlabel_smoothing = {}\nlearned_positions = {}\n"
      "max_positions = {}\nshare_embeddings = {}\npre_norm = {}\nlayer_norm_eps = {}\n",
      vocab_size, depth, d_model, d_ff, heads, d_k, d_v, dropout, attention_dropout,
      label_smoothing, learned_positions, max_positions, share_embeddings, pre_norm,
      layer_norm_eps);
  const ModelConfig paper;
  if (activation != paper.activation) text += fmt::format("activation = {}\n", activation_name(activation));
  if (scale_embeddings != paper.scale_embeddings) text += fmt::format("scale_embeddings = {}\n", scale_embeddings);
  if (position_layout != paper.position_layout)
    text += fmt::format("position_layout = {}\n", kPositionLayouts(position_layout));
  if (position_offset != paper.position_offset) text += fmt::format("position_offset = {}\n", position_offset);
  if (tie_output != paper.tie_output) text += fmt::format("tie_output = {}\n", tie_output);
  if (output_bias != paper.output_bias) text += fmt::format("output_bias = {}\n", output_bias);
  if (decoder_start_id != paper.decoder_start_id) text += fmt::format("decoder_start_id = {}\n", decoder_start_id);
  if (eos_id != paper.eos_id) text += fmt::format("eos_id = {}\n", eos_id);
  if (source_eos != paper.source_eos) text += fmt::format("source_eos = {}\n", source_eos);
  return text;
}

void ModelConfig::validate() const {
  if (!learned_positions && d_model % 2 != 0)
    fail("config: d_model must be even for sinusoidal positions, got {}", d_model);
  if (position_layout == PositionLayout::fairseq && d_model < 4)
    fail("config: position_layout = fairseq needs d_model >= 4, got {}", d_model);
  if (learned_positions && (position_offset != 0 || position_layout != PositionLayout::interleaved))
    fail("config: position_layout and position_offset are for sinusoids, not learned_positions");
  if (decoder_start_id >= vocab_size)
    fail("config: decoder_start_id {} is past the vocabulary (vocab_size = {})", decoder_start_id, vocab_size);
  if (eos_id >= vocab_size) fail("config: eos_id {} is past the vocabulary (vocab_size = {})", eos_id, vocab_size);
}

int64_t ModelConfig::parameter_count() const {
  const int64_t D = d_model, F = d_ff, HK = heads * d_k, HE = heads * d_v;
  const int64_t attention = 2 * (D * HK + HK) + (D * HE + HE) + (HE * D + D);
  const int64_t ffn = (D * F + F) + (F * D + D);
  const int64_t norm = 2 * D;
  const int64_t encoder_layer = attention + norm + ffn + norm;
  const int64_t decoder_layer = 2 * (attention + norm) + ffn + norm;
  int64_t n = encoder_layers * encoder_layer + decoder_layers * decoder_layer;
  n += (share_embeddings ? 1 : 2) * vocab_size * D;
  if (!tie_output) n += vocab_size * D;
  if (output_bias) n += vocab_size;
  if (learned_positions) n += 2 * max_positions * D;
  if (pre_norm) n += 2 * norm;
  return n;
}

}  // namespace tfm
