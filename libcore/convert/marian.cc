// Marian models (convert.h, source marian): the .npz Marian writes, with its
// configuration in the entry special:model.yml.
//
// Marian's Transformer (type transformer, post-norm: transformer-preprocess
// "" and transformer-postprocess "dan") is the one of Hugging Face's Marian
// port: sinusoids in halves from position 0, embeddings scaled by
// sqrt(dim-emb), the source ending in </s>. Its decoder starts from a zero
// vector, not a token: as transformers' converter does, the vocabulary
// gains a <pad> (its last id) whose embedding and logit bias are zero, and
// the decoder starts from it. So a Marian model and its transformers port
// convert to the same checkpoint.
//
// Parameter names (l counts from 1; weights are (in, out), biases (1, out)):
//   Wemb                          the embedding of both sides and the output
//                                 (tied-embeddings-all); else encoder_Wemb,
//                                 decoder_Wemb, and decoder_ff_logit_out_W
//                                 unless tied-embeddings
//   decoder_ff_logit_out_b        the logits' bias
//   encoder_l{l}_self_{Wq,bq,Wk,bk,Wv,bv,Wo,bo}, ..._self_Wo_ln_{scale,bias}
//   encoder_l{l}_ffn_{W1,b1,W2,b2}, ..._ffn_ffn_ln_{scale,bias}
//   decoder_l{l}_self_...         as the encoder's
//   decoder_l{l}_context_...      the attention over the source, likewise
//   decoder_l{l}_ffn_...
#include <filesystem>
#include <string>
#include <unordered_map>

#include "libcore/base/error.h"
#include "libcore/convert/imported.h"
#include "libcore/convert/sources.h"
#include "libcore/io/json_read.h"
#include "libcore/io/npz.h"
#include "libcore/io/read_file.h"
#include "libcore/io/yaml_read.h"

namespace tfm::convert {
namespace {

std::string text_of(const io::Value& v) {
  switch (v.kind()) {
    case io::Value::Kind::string: return v.as_string();
    case io::Value::Kind::integer: return std::to_string(v.as_int());
    case io::Value::Kind::boolean: return v.as_bool() ? "true" : "false";
    case io::Value::Kind::null: return "";
    default: return std::string(v.kind_name());
  }
}

// A model.yml field as text, with Marian's default when absent.
std::string field(const io::Value& y, std::string_view key, std::string fallback) {
  const io::Value* v = y.find(key);
  return v ? text_of(*v) : fallback;
}

// Marian's configuration as tfm's; `vocab` counts Marian's own pieces (the
// <pad> tfm adds comes on top).
ModelConfig marian_config(const std::string& origin, const io::Value& y, int64_t vocab, bool logit_bias) {
  const auto must = [&](std::string_view key, std::string_view want, std::string fallback, std::string_view why) {
    const std::string v = field(y, key, fallback);
    if (v != want) refuse(origin, key, v.empty() ? "\"\"" : v, why);
  };
  must("type", "transformer", "amun", "is not a Transformer (type = transformer)");
  must("transformer-preprocess", "", "", "is not the post-norm Transformer tfm reads (transformer-preprocess \"\")");
  must("transformer-postprocess", "dan", "dan", "is not the post-norm Transformer tfm reads (dan)");
  must("transformer-postprocess-emb", "d", "d", "is not what tfm reads (d: dropout only)");
  must("transformer-decoder-autoreg", "self-attention", "self-attention", "is not self-attention");
  if (int_or(y, "transformer-ffn-depth", 2) != 2)
    refuse(origin, "transformer-ffn-depth", field(y, "transformer-ffn-depth", ""), "is not 2");
  if (bool_or(y, "transformer-train-position-embeddings", false))
    refuse(origin, "transformer-train-position-embeddings", "true", "(learned positions) is not read");
  ModelConfig m;
  m.vocab_size = vocab + 1;
  if (const io::Value* dims = y.find("dim-vocabs")) {
    for (const io::Value& d : dims->items())
      if (d.as_int() != vocab)
        refuse(origin, "dim-vocabs", std::to_string(d.as_int()),
               fmt::format("differs from the vocabulary's {} pieces: tfm needs one shared vocabulary", vocab));
  }
  m.d_model = int_or(y, "dim-emb", 512);
  m.encoder_layers = int_or(y, "enc-depth", 6);
  m.decoder_layers = int_or(y, "dec-depth", 6);
  m.heads = int_or(y, "transformer-heads", 8);
  m.d_ff = int_or(y, "transformer-dim-ffn", 2048);
  if (m.d_model % m.heads != 0)
    refuse(origin, "dim-emb", std::to_string(m.d_model), fmt::format("is not a multiple of {} heads", m.heads));
  m.d_k = m.d_v = m.d_model / m.heads;
  const std::string act = field(y, "transformer-ffn-activation", "swish");
  if (act == "relu") m.activation = ops::Activation::relu;
  else if (act == "swish") m.activation = ops::Activation::silu;
  else refuse(origin, "transformer-ffn-activation", act, "is not an activation tfm has (relu, swish)");
  m.share_embeddings = bool_or(y, "tied-embeddings-all", false) || bool_or(y, "tied-embeddings-src", false);
  m.tie_output = bool_or(y, "tied-embeddings-all", false) || bool_or(y, "tied-embeddings", false);
  m.output_bias = logit_bias;
  m.scale_embeddings = true;
  m.position_layout = PositionLayout::halves;
  m.layer_norm_eps = 1e-5f;  // as transformers' port of Marian
  m.decoder_start_id = vocab;  // the <pad> added last
  m.eos_id = 0;
  m.source_eos = true;
  m.dropout = static_cast<float>(float_or(y, "transformer-dropout", 0.0));
  m.attention_dropout = static_cast<float>(float_or(y, "transformer-dropout-attention", 0.0));
  m.label_smoothing = static_cast<float>(float_or(y, "label-smoothing", 0.0));
  m.validate();
  return m;
}

// Marian's vocabulary (.yml: piece: id; or .json), ids 0 .. V - 1 each once.
std::vector<std::string> marian_pieces(const std::string& path) {
  const std::string text = io::read_file(path);
  const io::Value v = path.ends_with(".json") ? io::parse_json(text, path) : io::parse_yaml(text, path);
  return pieces_by_id(v, path, static_cast<int64_t>(v.size()));
}

// The one *.vocab.yml beside the model, when --vocab does not name one.
std::string find_vocab(const std::string& given, const std::filesystem::path& dir) {
  if (!given.empty()) return given;
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator(dir.empty() ? "." : dir))
    if (e.path().filename().string().ends_with(".vocab.yml")) found.push_back(e.path().string());
  TFM_REQUIRE(found.size() == 1, "{} *.vocab.yml files beside the model in {}: name the vocabulary with --vocab",
              found.size(), dir.empty() ? "." : dir.string());
  return found.front();
}

}  // namespace

Converted read_marian(const ConvertOptions& o) {
  const std::string origin = fmt::format("the Marian model {}", o.input);
  std::unordered_map<std::string, io::Array> tensors;
  for (io::NamedArray& t : io::read_npz(o.input)) tensors.emplace(std::move(t.name), std::move(t.array));
  const auto yml = tensors.find("special:model.yml");
  TFM_REQUIRE(yml != tensors.end(), "{} has no special:model.yml entry: not a model Marian wrote", o.input);
  // Marian writes the text with a NUL after it (as a C string).
  std::string_view yml_text = yml->second.text();
  while (!yml_text.empty() && yml_text.back() == '\0') yml_text.remove_suffix(1);
  const io::Value y = io::parse_yaml(yml_text, o.input + " (special:model.yml)");
  const std::filesystem::path dir = std::filesystem::path(o.input).parent_path();
  const std::string vocab_path = find_vocab(o.vocab, dir);
  std::vector<std::string> pieces = marian_pieces(vocab_path);
  const int64_t V = static_cast<int64_t>(pieces.size());

  const auto bias = tensors.find("decoder_ff_logit_out_b");
  bool logit_bias = false;
  if (bias != tensors.end())
    for (float x : bias->second.to_f32()) logit_bias |= x != 0;
  const ModelConfig config = marian_config(origin, y, V, logit_bias);
  ImportedModel model(origin, config);

  // Marian's name -> tfm's, the weights (in, out) transposed; the embedding
  // and the logits' bias without the <pad> row tfm adds.
  std::unordered_map<std::string, std::string> names;
  const auto attention = [&](const std::string& marian, const std::string& tfm) {
    for (const char* p : {"q", "k", "v"}) {
      names[fmt::format("{}_W{}", marian, p)] = fmt::format("{}.{}_proj.weight", tfm, p);
      names[fmt::format("{}_b{}", marian, p)] = fmt::format("{}.{}_proj.bias", tfm, p);
    }
    names[marian + "_Wo"] = tfm + ".out_proj.weight";
    names[marian + "_bo"] = tfm + ".out_proj.bias";
  };
  const auto norm = [&](const std::string& marian, const std::string& tfm) {
    names[marian + "_ln_scale"] = tfm + ".weight";
    names[marian + "_ln_bias"] = tfm + ".bias";
  };
  const auto ffn = [&](const std::string& marian, const std::string& tfm) {
    names[marian + "_ffn_W1"] = tfm + "fc1.weight";
    names[marian + "_ffn_b1"] = tfm + "fc1.bias";
    names[marian + "_ffn_W2"] = tfm + "fc2.weight";
    names[marian + "_ffn_b2"] = tfm + "fc2.bias";
    norm(marian + "_ffn_ffn", tfm + "final_layer_norm");
  };
  for (int64_t l = 0; l < config.encoder_layers; ++l) {
    const std::string m = fmt::format("encoder_l{}", l + 1), t = fmt::format("encoder.layers.{}.", l);
    attention(m + "_self", t + "self_attn");
    norm(m + "_self_Wo", t + "self_attn_layer_norm");
    ffn(m, t);
  }
  for (int64_t l = 0; l < config.decoder_layers; ++l) {
    const std::string m = fmt::format("decoder_l{}", l + 1), t = fmt::format("decoder.layers.{}.", l);
    attention(m + "_self", t + "self_attn");
    norm(m + "_self_Wo", t + "self_attn_layer_norm");
    attention(m + "_context", t + "encoder_attn");
    norm(m + "_context_Wo", t + "encoder_attn_layer_norm");
    ffn(m, t);
  }

  for (const auto& [source, array] : tensors) {
    if (source.starts_with("special:")) continue;
    if (source == "Wemb") {
      model.set(config.share_embeddings ? "embed.weight" : "encoder.embed_tokens.weight", array, source, false, V);
      if (!config.share_embeddings) model.set("decoder.embed_tokens.weight", array, source, false, V);
    } else if (source == "encoder_Wemb" || source == "decoder_Wemb") {
      model.set(source == "encoder_Wemb" ? "encoder.embed_tokens.weight" : "decoder.embed_tokens.weight", array,
                source, false, V);
    } else if (source == "decoder_ff_logit_out_W") {
      if (!config.tie_output) model.set("decoder.output_projection.weight", array, source, true, V);
    } else if (source == "decoder_ff_logit_out_b") {
      if (logit_bias) model.set("decoder.output_bias", array, source, false, V);
    } else {
      const auto to = names.find(source);
      TFM_REQUIRE(to != names.end(), "{}: its tensor '{}' has no place in tfm's model of its configuration",
                  origin, source);
      const bool matrix = to->second.ends_with(".weight") && to->second.find("layer_norm") == std::string::npos;
      model.set(to->second, array, source, /*transposed=*/matrix);
    }
  }
  pieces.push_back("<pad>");
  Vocab vocab = bundle(beside(o.source_spm, dir.string(), "source.spm"),
                       beside(o.target_spm, dir.string(), "target.spm"), std::move(pieces), origin);
  return {std::move(model), std::move(vocab)};
}

}  // namespace tfm::convert
