// Hugging Face MarianMTModel directories (convert.h, source hf).
//
// transformers' Marian is the Transformer of Marian: post-norm, sinusoids
// in halves from position 0 (MarianSinusoidalPositionalEmbedding), the
// embedding scaled by sqrt(D) when scale_embedding, q k^T / sqrt(K) with
// biases on every projection, a bias on the logits (final_logits_bias),
// the source ending in eos, the decoder starting from decoder_start_token_id
// (<pad> in OPUS-MT's models). Its tensors are named as tfm's (both follow
// fairseq) under "model.", so most of them keep their names.
#include <string>
#include <unordered_map>

#include "libcore/base/error.h"
#include "libcore/base/log.h"
#include "libcore/convert/convert.h"
#include "libcore/convert/imported.h"
#include "libcore/convert/sources.h"
#include "libcore/io/json_read.h"
#include "libcore/io/read_file.h"
#include "libcore/io/safetensors.h"
#include "libcore/io/torch_read.h"

namespace tfm::convert {
namespace {

// The tensors of model.safetensors or pytorch_model.bin, by name.
std::unordered_map<std::string, io::Array> read_tensors(const std::string& dir, std::string& file) {
  std::unordered_map<std::string, io::Array> out;
  if (!(file = beside("", dir, "model.safetensors")).empty()) {
    for (io::NamedArray& t : io::read_safetensors(file).tensors) out.emplace(std::move(t.name), std::move(t.array));
    return out;
  }
  file = beside("", dir, "pytorch_model.bin");
  TFM_REQUIRE(!file.empty(), "{} holds neither model.safetensors nor pytorch_model.bin (a sharded model is not "
              "read: save it as one file)", dir);
  const io::Value state = io::read_torch(file);
  const io::Value& dict = state.contains("state_dict") ? state["state_dict"] : state;
  for (const auto& [key, value] : dict.as_dict()) out.emplace(key.as_string(), value.as_array());
  return out;
}

// Two fields tfm has once must agree.
int64_t one_of_two(const std::string& origin, const io::Value& c, std::string_view a, std::string_view b,
                   int64_t fallback) {
  const int64_t x = int_or(c, a, fallback), y = int_or(c, b, fallback);
  if (x != y)
    refuse(origin, b, std::to_string(y),
           fmt::format("differs from {} = {}: tfm's encoder and decoder share it", a, x));
  return x;
}

ModelConfig hf_config(const std::string& origin, const io::Value& c, bool logit_bias) {
  const std::string type = string_or(c, "model_type", "");
  if (type != "marian")
    refuse(origin, "model_type", type.empty() ? "(none)" : type, "is not a Marian model (model_type = marian)");
  ModelConfig m;
  m.vocab_size = int_or(c, "vocab_size", 58101);
  const int64_t decoder_vocab = int_or(c, "decoder_vocab_size", m.vocab_size);
  if (decoder_vocab != m.vocab_size)
    refuse(origin, "decoder_vocab_size", std::to_string(decoder_vocab),
           fmt::format("differs from vocab_size = {}: tfm's source and target share one vocabulary", m.vocab_size));
  m.d_model = int_or(c, "d_model", 1024);
  m.encoder_layers = int_or(c, "encoder_layers", 12);
  m.decoder_layers = int_or(c, "decoder_layers", 12);
  m.heads = one_of_two(origin, c, "encoder_attention_heads", "decoder_attention_heads", 16);
  m.d_ff = one_of_two(origin, c, "encoder_ffn_dim", "decoder_ffn_dim", 4096);
  if (m.d_model % m.heads != 0)
    refuse(origin, "d_model", std::to_string(m.d_model), fmt::format("is not a multiple of {} heads", m.heads));
  m.d_k = m.d_v = m.d_model / m.heads;
  const std::string act = string_or(c, "activation_function", "gelu");
  if (act == "relu") m.activation = ops::Activation::relu;
  else if (act == "gelu") m.activation = ops::Activation::gelu;
  else if (act == "swish" || act == "silu") m.activation = ops::Activation::silu;
  else refuse(origin, "activation_function", act, "is not an activation tfm has (relu, gelu, swish / silu)");
  m.scale_embeddings = bool_or(c, "scale_embedding", false);
  m.share_embeddings = bool_or(c, "share_encoder_decoder_embeddings", true);
  m.tie_output = bool_or(c, "tie_word_embeddings", true);
  m.output_bias = logit_bias;
  m.position_layout = PositionLayout::halves;
  m.max_positions = int_or(c, "max_position_embeddings", 1024);
  m.layer_norm_eps = 1e-5f;  // nn.LayerNorm's, which Marian's layers use
  m.decoder_start_id = int_or(c, "decoder_start_token_id", 58100);
  m.eos_id = int_or(c, "eos_token_id", 0);
  m.source_eos = true;
  m.dropout = static_cast<float>(float_or(c, "dropout", 0.1));
  m.attention_dropout = static_cast<float>(float_or(c, "attention_dropout", 0.0));
  if (const double a = float_or(c, "activation_dropout", 0.0); a != 0)
    log::warn("{}: activation_dropout = {} is not one of tfm's dropouts: fine-tuning leaves it out", origin, a);
  m.validate();
  return m;
}

bool all_zero(const io::Array& a) {
  for (float x : a.to_f32())
    if (x != 0) return false;
  return true;
}

}  // namespace

Converted read_hf(const ConvertOptions& o) {
  const std::string& dir = o.input;
  const std::string origin = fmt::format("the Hugging Face model in {}", dir);
  const std::string config_path = beside("", dir, "config.json");
  TFM_REQUIRE(!config_path.empty(), "{} has no config.json: not a Hugging Face model directory", dir);
  const io::Value config_json = io::parse_json(io::read_file(config_path), config_path);
  std::string file;
  std::unordered_map<std::string, io::Array> tensors = read_tensors(dir, file);

  // A logit bias of zeros is none: adding it changes no bit.
  const auto bias = tensors.find("final_logits_bias");
  const bool logit_bias = bias != tensors.end() && !all_zero(bias->second);
  const ModelConfig config = hf_config(origin, config_json, logit_bias);
  ImportedModel model(origin, config);

  for (const auto& [source, array] : tensors) {
    std::string name = source.starts_with("model.") ? source.substr(6) : source;
    if (name == "final_logits_bias") {
      if (logit_bias) model.set("decoder.output_bias", array, source);
    } else if (name == "shared.weight") {
      if (config.share_embeddings) model.set("embed.weight", array, source);
    } else if (name == "encoder.embed_tokens.weight" || name == "decoder.embed_tokens.weight") {
      // With shared embeddings, copies of shared.weight (pytorch_model.bin keeps them).
      if (!config.share_embeddings) model.set(name, array, source);
    } else if (name == "lm_head.weight") {
      if (!config.tie_output) model.set("decoder.output_projection.weight", array, source);
    } else if (name.ends_with("embed_positions.weight")) {
      continue;  // the sinusoids, which tfm computes (position_layout = halves)
    } else if (name.starts_with("encoder.layers.") || name.starts_with("decoder.layers.")) {
      model.set(name, array, source);  // tfm's names are Marian's (both fairseq's)
    } else {
      fail("{}: {} has a tensor '{}' that tfm's model has no place for", origin, file, source);
    }
  }
  if (config.share_embeddings && !model.has("embed.weight"))
    fail("{}: {} has no model.shared.weight, the embedding its configuration shares", origin, file);

  const std::string vocab_path = beside(o.vocab, dir, "vocab.json");
  TFM_REQUIRE(!vocab_path.empty(), "{} has no vocab.json (or give --vocab)", dir);
  Vocab vocab = bundle(beside(o.source_spm, dir, "source.spm"), beside(o.target_spm, dir, "target.spm"),
                       pieces_by_id(io::parse_json(io::read_file(vocab_path), vocab_path), vocab_path,
                                    config.vocab_size), origin);
  return {std::move(model), std::move(vocab)};
}

}  // namespace tfm::convert
