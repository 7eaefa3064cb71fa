#include "libcore/viz/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "libcore/base/error.h"
#include "libcore/base/log.h"
#include "libcore/base/stream.h"
#include "libcore/data/line_reader.h"
#include "libcore/data/token_line.h"
#include "libcore/decode/translate.h"

namespace tfm::viz {

namespace {

// Host f32 copies of a device tensor of any float dtype, ordered after the
// work queued on `stream`.
std::vector<float> to_host_f32(const TensorView& t, const Stream& stream) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  switch (t.dtype()) {
    case DType::f32:
      copy(TensorView(out.data(), DType::f32, t.shape()), t, stream);
      break;
    case DType::f64: {
      std::vector<double> d(out.size());
      copy(TensorView(d.data(), DType::f64, t.shape()), t, stream);
      std::transform(d.begin(), d.end(), out.begin(), [](double v) { return static_cast<float>(v); });
      break;
    }
    case DType::bf16: {
      std::vector<bf16> h(out.size());
      copy(TensorView(h.data(), DType::bf16, t.shape()), t, stream);
      std::transform(h.begin(), h.end(), out.begin(), [](bf16 v) { return static_cast<float>(v); });
      break;
    }
    case DType::f16: {
      std::vector<f16> h(out.size());
      copy(TensorView(h.data(), DType::f16, t.shape()), t, stream);
      std::transform(h.begin(), h.end(), out.begin(), [](f16 v) { return static_cast<float>(v); });
      break;
    }
    case DType::i32:
      fail("internal: attention weights of dtype i32");
  }
  return out;
}

}  // namespace

const char* stack_name(Stack s) {
  switch (s) {
    case Stack::enc: return "enc";
    case Stack::dec: return "dec";
    case Stack::cross: return "cross";
  }
  return "?";
}

Stack parse_stack(const std::string& name) {
  for (Stack s : kStacks)
    if (name == stack_name(s)) return s;
  fail("unknown attention stack '{}': enc, dec or cross", name);
}

int64_t SentenceAttention::queries(Stack s) const {
  return static_cast<int64_t>(s == Stack::enc ? source.size() : target.size());
}
int64_t SentenceAttention::keys(Stack s) const {
  return static_cast<int64_t>(s == Stack::dec ? target.size() : source.size());
}
const std::vector<std::string>& SentenceAttention::query_tokens(Stack s) const {
  return s == Stack::enc ? source : target;
}
const std::vector<std::string>& SentenceAttention::key_tokens(Stack s) const {
  return s == Stack::enc ? source : s == Stack::dec ? target_in : source;
}
const float* SentenceAttention::map(Stack s, int64_t layer, int64_t head) const {
  const std::vector<float>& w = s == Stack::enc ? enc : s == Stack::dec ? dec : cross;
  return w.data() + ((layer * heads + head) * queries(s) * keys(s));
}

void read_attention(const Transformer& model, int64_t b, int64_t src_len, int64_t tgt_len,
                    SentenceAttention& out) {
  const int64_t L = model.config().decoder_layers, H = model.config().heads;
  TFM_REQUIRE(model.config().encoder_layers == L,
              "the model's encoder has {} layers and its decoder {}: attention is drawn for stacks of one depth",
              model.config().encoder_layers, L);
  // map() indexes by the token counts: blank tokens until the caller names them.
  out.source.resize(static_cast<size_t>(src_len));
  out.target.resize(static_cast<size_t>(tgt_len));
  out.target_in.resize(static_cast<size_t>(tgt_len));
  out.layers = L;
  out.heads = H;
  const Transformer::Attention kinds[] = {Transformer::Attention::encoder,
                                          Transformer::Attention::decoder,
                                          Transformer::Attention::cross};
  std::vector<float>* dst[] = {&out.enc, &out.dec, &out.cross};
  const int64_t tq[] = {src_len, tgt_len, tgt_len}, tk[] = {src_len, tgt_len, src_len};
  for (int k = 0; k < 3; ++k) {
    dst[k]->assign(static_cast<size_t>(L * H * tq[k] * tk[k]), 0.0f);
    for (int64_t l = 0; l < L; ++l) {
      const TensorView probs = model.attention_probs(kinds[k], l);  // (B, H, Tq, Tk)
      const int64_t Tq = probs.dim(2), Tk = probs.dim(3);
      TFM_REQUIRE(b < probs.dim(0) && tq[k] <= Tq && tk[k] <= Tk,
                  "internal: sentence {} of {} x {} is outside the pass's ({}, {}, {})", b, tq[k],
                  tk[k], probs.dim(0), Tq, Tk);
      // The sentence's (H, Tq, Tk) block, then its rows cut to the lengths.
      const size_t block = static_cast<size_t>(H * Tq * Tk);
      auto* base = static_cast<char*>(probs.data()) + b * static_cast<int64_t>(block * dtype_size(probs.dtype()));
      const std::vector<float> all =
          to_host_f32(TensorView(base, probs.dtype(), {H, Tq, Tk}, probs.device()), model.stream());
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < tq[k]; ++i)
          std::memcpy(dst[k]->data() + ((l * H + h) * tq[k] + i) * tk[k],
                      all.data() + (h * Tq + i) * Tk, static_cast<size_t>(tk[k]) * sizeof(float));
    }
  }
}

Lines read_lines(const std::string& path, int64_t max) {
  data::LineReader in(path);
  Lines out;
  std::string line;
  while (static_cast<int64_t>(out.text.size()) < max && in.next(line)) {
    out.text.push_back(line);
    out.names.push_back(fmt::format("{}:{}", path == "-" ? "stdin" : path, in.line_number()));
  }
  out.more = in.next(line);
  return out;
}

AttentionModel::AttentionModel(ModelFile checkpoint, const AttentionOptions& options)
    : file_(std::move(checkpoint)), options_(options) {
  // The model for the passes is planned in run(), once the sentences'
  // lengths are known.
  TFM_REQUIRE(file_.vocab(),
              "{} embeds no SentencePiece model: tfm-attnviz shows pieces, so it needs a checkpoint "
              "with its tokenizer (as tfm-train writes them)",
              file_.path());
}

AttentionModel::~AttentionModel() = default;

std::vector<int32_t> AttentionModel::encode(const std::string& line) const {
  if (!options_.pieces) return vocab().encode_ids(line);
  return parse_token_line(line, &vocab(), vocab().size());
}

std::vector<std::vector<int32_t>> AttentionModel::decode(const std::vector<std::vector<int32_t>>& sources) {
  TranslateOptions t;
  t.search = options_.search;
  t.search.n_best = 1;
  t.max_len_a = options_.max_len_a;
  t.max_len_b = options_.max_len_b;
  t.batch_size = static_cast<int64_t>(sources.size());
  int64_t longest = 1, tokens = 0;
  for (const auto& s : sources) {
    longest = std::max<int64_t>(longest, static_cast<int64_t>(s.size()));
    tokens += static_cast<int64_t>(s.size());
  }
  t.max_input_len = longest;
  t.max_tokens = std::max<int64_t>(longest * t.batch_size, tokens);
  IncrementalDecoder decoder(*model_, translate_limits(*model_, t));
  std::vector<SearchRequest> requests;
  const Framing framing = Framing::of(config());
  for (const auto& s : sources) {
    SearchRequest r;
    r.source = framing.source(s);
    // The pass that follows needs the target's positions (eos included).
    r.max_len = std::min(max_output_len(*model_, t, static_cast<int64_t>(s.size())),
                         model_->limits().max_len - 1);
    requests.push_back(r);
  }
  const std::vector<std::vector<Hypothesis>> found = beam_search(decoder, requests, t.search);
  std::vector<std::vector<int32_t>> out;
  for (const auto& nbest : found) out.push_back(nbest.front().tokens);
  return out;
}

SentenceAttention AttentionModel::forward(const std::vector<int32_t>& source,
                                          const std::vector<int32_t>& target) {
  const Framing framing = Framing::of(config());
  const HostBatch batch = HostBatch::from_pairs({source}, {target}, framing);
  model_->evaluate(batch);
  SentenceAttention out;
  read_attention(*model_, 0, batch.src_len, batch.tgt_len, out);
  // The framing's ids by the vocabulary's pieces where it has them.
  const auto piece = [&](int32_t id, std::string_view fallback) {
    return std::string(id < vocab().size() ? vocab().piece(id) : fallback);
  };
  for (size_t i = 0; i < source.size(); ++i) out.source[i] = vocab().piece(source[i]);
  if (framing.source_eos) out.source.back() = piece(framing.eos, "</s>");
  out.target_in[0] = piece(framing.start, "<s>");
  for (size_t i = 0; i < target.size(); ++i) out.target[i] = out.target_in[i + 1] = vocab().piece(target[i]);
  out.target.back() = piece(framing.eos, "</s>");
  return out;
}

std::vector<SentenceAttention> AttentionModel::run(const std::vector<std::string>& sources,
                                                   const std::vector<std::optional<std::string>>& targets,
                                                   const std::vector<std::string>& names) {
  TFM_REQUIRE(!sources.empty(), "no sentence to show");
  TFM_REQUIRE(targets.size() == sources.size() && names.size() == sources.size(),
              "internal: {} sources, {} targets, {} names", sources.size(), targets.size(), names.size());
  const int64_t P = config().max_positions;
  std::vector<std::vector<int32_t>> src, tgt(sources.size());
  int64_t max_len = 1;
  TranslateOptions bound;  // the longest target beam search may give
  bound.max_len_a = options_.max_len_a;
  bound.max_len_b = options_.max_len_b;
  for (size_t i = 0; i < sources.size(); ++i) {
    src.push_back(encode(sources[i]));
    const auto S = static_cast<int64_t>(src.back().size());
    if (S == 0) throw Error("an empty sentence: the model needs at least one source piece", names[i]);
    if (S > P)
      throw Error(fmt::format("a source of {} pieces is longer than the model's {} positions", S, P), names[i]);
    int64_t T = 0;
    if (targets[i]) {
      tgt[i] = encode(*targets[i]);
      T = static_cast<int64_t>(tgt[i].size()) + 1;
      if (T > P)
        throw Error(fmt::format("a target of {} pieces (and eos) is longer than the model's {} positions",
                                T - 1, P),
                    names[i]);
    } else {
      const double n = std::floor(bound.max_len_a * static_cast<double>(S) + bound.max_len_b);
      T = static_cast<int64_t>(std::min(n, static_cast<double>(P - 1))) + 1;
    }
    max_len = std::max({max_len, S, T});
  }
  ModelLimits limits;  // passes of one sentence
  max_len += config().source_eos;  // the source's eos, when the model reads one
  limits.max_len = max_len;
  limits.max_tokens = max_len;
  limits.loss_chunk = max_len;
  model_ = file_.load_model(limits, options_.device);

  std::vector<size_t> undecided;
  std::vector<std::vector<int32_t>> to_decode;
  for (size_t i = 0; i < sources.size(); ++i)
    if (!targets[i]) {
      undecided.push_back(i);
      to_decode.push_back(src[i]);
    }
  if (!to_decode.empty()) {
    const std::vector<std::vector<int32_t>> found = decode(to_decode);
    for (size_t k = 0; k < undecided.size(); ++k) tgt[undecided[k]] = found[k];
    log::debug("decoded {} targets by beam search (beam {})", undecided.size(), options_.search.beam_size);
  }
  std::vector<SentenceAttention> out;
  for (size_t i = 0; i < sources.size(); ++i) {
    out.push_back(forward(src[i], tgt[i]));
    out.back().decoded = !targets[i].has_value();
  }
  return out;
}

}  // namespace tfm::viz
