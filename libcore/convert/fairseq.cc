// fairseq transformer checkpoints (convert.h, source fairseq): the .pt that
// fairseq's checkpoint_utils saves (torch.save of a dict: the model's state
// dict under "model", its options under "args", an argparse.Namespace, or
// under "cfg"["model"] in later versions), and the dictionaries beside it.
//
// fairseq's Transformer: sinusoids in halves with frequencies
// 10000^(-i / (D/2 - 1)), positions counted from padding_idx + 1 = 2
// (position_layout fairseq, position_offset 2), embeddings scaled by
// sqrt(D) unless no_scale_embedding, post-norm or pre-norm
// (encoder_normalize_before, with a final layer norm a stack), ReLU or GELU,
// sources ending in </s>, the decoder starting from </s>. Its tensor names
// are tfm's (tfm took fairseq's).
//
// Dictionaries: dict.SRC.txt and dict.TGT.txt, a "piece count" line a piece
// after fairseq's four specials (<s> 0, <pad> 1, </s> 2, <unk> 3), padded
// with madeupword0000 ... to the embedding's rows as fairseq pads them. tfm
// has one vocabulary: the two must be the same (a joined dictionary).
#include <filesystem>
#include <string>
#include <unordered_map>

#include "libcore/base/error.h"
#include "libcore/base/log.h"
#include "libcore/convert/imported.h"
#include "libcore/convert/sources.h"
#include "libcore/io/read_file.h"
#include "libcore/io/torch_read.h"

namespace tfm::convert {
namespace {

// The model's options: args (a Namespace), or cfg["model"] (fairseq >= 0.10).
const io::Value& model_options(const std::string& path, const io::Value& ck) {
  if (const io::Value* args = ck.find("args"); args && !args->is_null()) return *args;
  if (const io::Value* cfg = ck.find("cfg"); cfg && !cfg->is_null())
    if (const io::Value* model = cfg->find("model"); model && !model->is_null()) return *model;
  fail("{} has neither args nor cfg['model']: not a checkpoint fairseq saved", path);
}

ModelConfig fairseq_config(const std::string& origin, const io::Value& a, int64_t vocab_size) {
  const auto must_equal = [&](std::string_view key, int64_t value, std::string_view other, int64_t other_value) {
    if (value != other_value)
      refuse(origin, key, std::to_string(value),
             fmt::format("differs from {} = {}: tfm's encoder and decoder share it", other, other_value));
  };
  const auto refuse_if = [&](std::string_view key, std::string_view why) {
    if (bool_or(a, key, false)) refuse(origin, key, "True", why);
  };
  refuse_if("layernorm_embedding", "(a layer norm of the embeddings) is not one tfm has");
  refuse_if("cross_self_attention", "is not attention tfm has");
  refuse_if("no_token_positional_embeddings", "(no positions) is not a model tfm has");
  refuse_if("encoder_learned_pos", "(learned positions counted from 2) is not read");
  refuse_if("decoder_learned_pos", "(learned positions counted from 2) is not read");
  if (const io::Value* c = a.find("adaptive_softmax_cutoff"); c && !c->is_null())
    refuse(origin, "adaptive_softmax_cutoff", "set", "(an adaptive softmax) is not an output layer tfm has");
  ModelConfig m;
  m.vocab_size = vocab_size;
  m.d_model = int_or(a, "encoder_embed_dim", 512);
  must_equal("decoder_embed_dim", int_or(a, "decoder_embed_dim", m.d_model), "encoder_embed_dim", m.d_model);
  if (const int64_t out = int_or(a, "decoder_output_dim", m.d_model); out != m.d_model)
    refuse(origin, "decoder_output_dim", std::to_string(out), "differs from the model's width");
  m.encoder_layers = int_or(a, "encoder_layers", 6);
  m.decoder_layers = int_or(a, "decoder_layers", 6);
  m.heads = int_or(a, "encoder_attention_heads", 8);
  must_equal("decoder_attention_heads", int_or(a, "decoder_attention_heads", m.heads), "encoder_attention_heads",
             m.heads);
  m.d_ff = int_or(a, "encoder_ffn_embed_dim", 2048);
  must_equal("decoder_ffn_embed_dim", int_or(a, "decoder_ffn_embed_dim", m.d_ff), "encoder_ffn_embed_dim", m.d_ff);
  if (m.d_model % m.heads != 0)
    refuse(origin, "encoder_embed_dim", std::to_string(m.d_model), fmt::format("is not a multiple of {} heads", m.heads));
  m.d_k = m.d_v = m.d_model / m.heads;
  const bool pre = bool_or(a, "encoder_normalize_before", false);
  if (bool_or(a, "decoder_normalize_before", false) != pre)
    refuse(origin, "decoder_normalize_before", pre ? "False" : "True",
           "differs from encoder_normalize_before: tfm's stacks are both pre-norm or both post-norm");
  m.pre_norm = pre;
  const std::string act = string_or(a, "activation_fn", "relu");
  if (act == "relu") m.activation = ops::Activation::relu;
  else if (act == "gelu") m.activation = ops::Activation::gelu;
  else refuse(origin, "activation_fn", act, "is not an activation tfm has (relu, gelu)");
  m.scale_embeddings = !bool_or(a, "no_scale_embedding", false);
  m.share_embeddings = bool_or(a, "share_all_embeddings", false);
  m.tie_output = m.share_embeddings || bool_or(a, "share_decoder_input_output_embed", false);
  m.position_layout = PositionLayout::fairseq;
  m.position_offset = 2;  // padding_idx + 1
  m.max_positions = std::max(int_or(a, "max_source_positions", 1024), int_or(a, "max_target_positions", 1024));
  m.layer_norm_eps = 1e-5f;
  m.decoder_start_id = 2;  // </s>
  m.eos_id = 2;
  m.source_eos = true;
  m.dropout = static_cast<float>(float_or(a, "dropout", 0.1));
  m.attention_dropout = static_cast<float>(float_or(a, "attention_dropout", 0.0));
  if (const double ls = float_or(a, "label_smoothing", -1); ls >= 0) m.label_smoothing = static_cast<float>(ls);
  m.validate();
  return m;
}

// A fairseq dictionary as a piece table of `rows` ids: the specials, the
// file's pieces, then fairseq's madeupwordNNNN to the embedding's rows.
std::vector<std::string> fairseq_pieces(const std::string& path, int64_t rows) {
  std::vector<std::string> pieces = {"<s>", "<pad>", "</s>", "<unk>"};
  const std::string text = io::read_file(path);
  size_t at = 0;
  int64_t line = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view l(text.data() + at, end - at);
    ++line;
    at = end + 1;
    if (l.empty()) continue;
    const size_t space = l.rfind(' ');
    TFM_REQUIRE(space != std::string_view::npos && space > 0, "{}:{}: not a 'piece count' line", path, line);
    std::string_view piece = l.substr(0, space);
    pieces.emplace_back(piece);
  }
  TFM_REQUIRE(static_cast<int64_t>(pieces.size()) <= rows,
              "{} has {} pieces with fairseq's four, but the model's embedding {} rows", path, pieces.size(), rows);
  for (int64_t i = 0; static_cast<int64_t>(pieces.size()) < rows; ++i) pieces.push_back(fmt::format("madeupword{:04d}", i));
  return pieces;
}

// dict.SRC.txt and dict.TGT.txt beside the checkpoint (its source_lang and
// target_lang, or the two dict.*.txt there are).
std::pair<std::string, std::string> dictionaries(const std::string& given, const std::filesystem::path& dir,
                                                 const io::Value& args, const io::Value& ck) {
  if (!given.empty()) return {given, given};
  std::string src = string_or(args, "source_lang", ""), tgt = string_or(args, "target_lang", "");
  if (const io::Value* cfg = ck.find("cfg"); (src.empty() || tgt.empty()) && cfg && !cfg->is_null())
    if (const io::Value* task = cfg->find("task"); task && !task->is_null()) {
      src = string_or(*task, "source_lang", src);
      tgt = string_or(*task, "target_lang", tgt);
    }
  const auto path = [&](const std::string& lang) { return (dir / fmt::format("dict.{}.txt", lang)).string(); };
  TFM_REQUIRE(!src.empty() && !tgt.empty() && std::filesystem::exists(path(src)) && std::filesystem::exists(path(tgt)),
              "no dict.SRC.txt and dict.TGT.txt beside the checkpoint{} (or give --vocab)",
              src.empty() ? "" : fmt::format(" (dict.{}.txt, dict.{}.txt)", src, tgt));
  return {path(src), path(tgt)};
}

}  // namespace

Converted read_fairseq(const ConvertOptions& o) {
  const std::string origin = fmt::format("the fairseq checkpoint {}", o.input);
  const io::Value ck = io::read_torch(o.input);
  const io::Value& args = model_options(o.input, ck);
  const std::string arch = string_or(args, "arch", string_or(args, "_name", ""));
  if (!arch.starts_with("transformer"))
    refuse(origin, "arch", arch.empty() ? "(none)" : arch, "is not a fairseq transformer");
  std::unordered_map<std::string, io::Array> tensors;
  for (const auto& [key, value] : ck["model"].as_dict())
    if (value.is(io::Value::Kind::array)) tensors.emplace(key.as_string(), value.as_array());
  const auto rows = [&](const std::string& name) {
    const auto t = tensors.find(name);
    TFM_REQUIRE(t != tensors.end() && t->second.shape.size() == 2, "{} has no 2-D tensor '{}'", origin, name);
    return t->second.shape[0];
  };
  const int64_t V = rows("decoder.embed_tokens.weight");
  if (rows("encoder.embed_tokens.weight") != V)
    refuse(origin, "encoder.embed_tokens.weight rows", std::to_string(rows("encoder.embed_tokens.weight")),
           fmt::format("differ from the decoder's {}: tfm's source and target share one vocabulary", V));
  const ModelConfig config = fairseq_config(origin, args, V);
  ImportedModel model(origin, config);

  const std::filesystem::path dir = std::filesystem::path(o.input).parent_path();
  const auto [src_dict, tgt_dict] = dictionaries(o.vocab, dir, args, ck);
  std::vector<std::string> pieces = fairseq_pieces(src_dict, V);
  TFM_REQUIRE(src_dict == tgt_dict || fairseq_pieces(tgt_dict, V) == pieces,
              "{}: {} and {} differ: tfm's source and target share one vocabulary (a joined dictionary)", origin,
              src_dict, tgt_dict);

  for (const auto& [name, array] : tensors) {
    if (name.ends_with("embed_positions._float_tensor") || name.ends_with(".version")) continue;  // no weights
    if (name == "encoder.embed_tokens.weight" || name == "decoder.embed_tokens.weight") {
      if (!config.share_embeddings) model.set(name, array, name);
      else if (name == "encoder.embed_tokens.weight") model.set("embed.weight", array, name);
    } else if (name == "decoder.output_projection.weight") {
      if (!config.tie_output) model.set(name, array, name);  // with tied weights, a copy
    } else {
      model.set(name, array, name);  // tfm's names are fairseq's
    }
  }
  Vocab vocab = bundle(beside(o.source_spm, dir.string(), "sentencepiece.bpe.model"),
                       beside(o.target_spm, dir.string(), "sentencepiece.bpe.model"), std::move(pieces), origin);
  return {std::move(model), std::move(vocab)};
}

}  // namespace tfm::convert
