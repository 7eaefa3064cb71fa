#include "libcore/model/incremental.h"

#include <cmath>

#include "kernels/ops.h"
#include "libcore/model/layers.h"

namespace tfm {

using model::prefix;

struct IncrementalDecoder::Ids {
  int tokens, self_lengths, src_lengths;
  std::vector<int> cache_k, cache_v, cross_k, cross_v;  // per layer
  int x, y_a, y_b, h, mean, rstd, s, q, k_new, v_new, scores, ctx, f, logits, proj;
};

IncrementalDecoder::IncrementalDecoder(Transformer& model, int64_t rows, int64_t max_src_len,
                                       int64_t max_steps)
    : model_(model), rows_(rows), max_src_len_(max_src_len), max_steps_(max_steps) {
  const ModelConfig& c = model.config();
  TFM_REQUIRE(rows >= 1 && max_src_len >= 1 && max_steps >= 1,
              "incremental decoder: rows, source length and steps must be positive");
  TFM_REQUIRE(!c.learned_positions || max_steps <= c.max_positions,
              "decoding {} steps needs more than the {} learned positions", max_steps,
              c.max_positions);
  const int64_t N = rows, H = c.heads, K = c.d_k, E = c.d_v, D = c.d_model;
  const DType dt = model.dtype(), pt = model.param_dtype();
  const DType st = pt;  // statistics and log-probs: f32 (f64 for f64 models)
  ids_ = std::make_unique<Ids>();
  Ids& i = *ids_;
  auto io = [&](const char* n) { return plan_.add(MemoryKind::io, n, DType::i32, {N}); };
  auto kv = [&](const std::string& n, int64_t t, int64_t x) {
    return plan_.add(MemoryKind::kv_cache, n, dt, {N, H, t, x});
  };
  auto act = [&](const char* n, Shape s) { return plan_.add(MemoryKind::activations, n, dt, s); };
  i.tokens = io("tokens");
  i.self_lengths = io("self_lengths");
  i.src_lengths = io("src_lengths");
  for (int64_t l = 0; l < c.layers; ++l) {
    i.cache_k.push_back(kv(fmt::format("self.{}.k", l), max_steps, K));
    i.cache_v.push_back(kv(fmt::format("self.{}.v", l), max_steps, E));
    i.cross_k.push_back(kv(fmt::format("cross.{}.k", l), max_src_len, K));
    i.cross_v.push_back(kv(fmt::format("cross.{}.v", l), max_src_len, E));
  }
  i.x = act("x", {N, D});
  i.y_a = act("y_a", {N, D});
  i.y_b = act("y_b", {N, D});
  i.h = act("h", {N, D});
  i.mean = plan_.add(MemoryKind::activations, "mean", st, {N});
  i.rstd = plan_.add(MemoryKind::activations, "rstd", st, {N});
  i.s = act("s", {N, D});
  i.q = act("q", {N, H * K});
  i.k_new = act("k_new", {N, H * K});
  i.v_new = act("v_new", {N, H * E});
  i.scores = act("scores", {N * H * std::max(max_steps, max_src_len)});
  i.ctx = act("ctx", {N, H * E});
  i.f = act("f", {N, c.d_ff});
  i.logits = plan_.add(MemoryKind::activations, "logits", pt, {N, c.vocab_size});
  i.proj = plan_.add(MemoryKind::workspace, "proj", dt, {N * max_src_len * H * std::max(K, E)});
  mem_ = std::make_unique<PlannedMemory>(plan_, model.device());
  if (!c.learned_positions) {
    Tensor table = sinusoid_table(max_steps, D, pt);
    positions_ = Tensor(table.shape(), pt, model.device());
    copy(positions_, table);
  }
}

IncrementalDecoder::~IncrementalDecoder() = default;

void IncrementalDecoder::start(const std::vector<std::vector<int32_t>>& sources) {
  const ModelConfig& c = model_.config();
  TFM_REQUIRE(static_cast<int64_t>(sources.size()) == rows_,
              "incremental decoder planned for {} rows, started with {} sentences", rows_,
              sources.size());
  const HostBatch batch =
      HostBatch::from_pairs(sources, std::vector<std::vector<int32_t>>(sources.size()));
  TFM_REQUIRE(batch.src_len <= max_src_len_, "a source of {} tokens is over the planned {}",
              batch.src_len, max_src_len_);
  S_ = batch.src_len;
  t_ = 0;
  const Stream& st = model_.stream();
  const TensorView enc = model_.encode(batch);  // (N * S, D)
  copy(mem_->view(ids_->src_lengths),
       TensorView(const_cast<int32_t*>(batch.src_lengths.data()), DType::i32, {rows_}), &st);
  // Zero the caches: positions not yet written must be finite (their
  // weights are 0, and 0 * NaN would not be).
  device_memset_zero(mem_->block(MemoryKind::kv_cache), model_.device(),
                     plan_.bytes(MemoryKind::kv_cache), st.native());

  const model::Blocks m{st, c, model_.layout(), model_.weights(), model_.grads(), {}};
  const int64_t N = rows_, H = c.heads, K = c.d_k, E = c.d_v;
  for (int64_t l = 0; l < c.layers; ++l) {
    const AttentionIds& w = model_.layout().decoder[static_cast<size_t>(l)].cross_attn;
    TensorView proj = prefix(mem_->view(ids_->proj), {N * S_, H * K});
    model::linear_forward(m, enc, w.k, proj);
    ops::permute_0213(proj.reshape({N, S_, H, K}), prefix(mem_->view(ids_->cross_k[l]), {N, H, S_, K}), st);
    proj = prefix(mem_->view(ids_->proj), {N * S_, H * E});
    model::linear_forward(m, enc, w.v, proj);
    ops::permute_0213(proj.reshape({N, S_, H, E}), prefix(mem_->view(ids_->cross_v[l]), {N, H, S_, E}), st);
  }
}

TensorView IncrementalDecoder::step(const std::vector<int32_t>& tokens) {
  const ModelConfig& c = model_.config();
  const ParamLayout& L = model_.layout();
  const Stream& st = model_.stream();
  TFM_REQUIRE(static_cast<int64_t>(tokens.size()) == rows_, "step: {} tokens for {} rows",
              tokens.size(), rows_);
  TFM_REQUIRE(t_ < max_steps_, "step {} is past the planned {} steps", t_ + 1, max_steps_);
  for (int32_t id : tokens)
    TFM_REQUIRE(id >= 0 && id < c.vocab_size, "token id {} is outside the vocabulary [0, {})", id,
                c.vocab_size);
  const int64_t N = rows_, H = c.heads, K = c.d_k, E = c.d_v, D = c.d_model;
  const size_t el = dtype_size(model_.dtype());
  const model::Blocks m{st, c, L, model_.weights(), model_.grads(), {}};
  const Ids& i = *ids_;
  auto view = [&](int id) { return mem_->view(id); };

  copy(view(i.tokens), TensorView(const_cast<int32_t*>(tokens.data()), DType::i32, {N}), &st);
  const std::vector<int32_t> lengths(static_cast<size_t>(N), static_cast<int32_t>(t_ + 1));
  copy(view(i.self_lengths), TensorView(const_cast<int32_t*>(lengths.data()), DType::i32, {N}), &st);

  // x = sqrt(D) E[token] + PE[t]   (no dropout when decoding)
  TensorView x = view(i.x);
  ops::embedding_forward(view(i.tokens), model_.param(L.tgt_embed),
                         static_cast<float>(std::sqrt(static_cast<double>(D))), x, st);
  ops::position_add(x.reshape({N, 1, D}),
                    c.learned_positions ? model_.param(L.tgt_pos) : positions_.view(), t_, st);

  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(K)));
  // One query per row against keys (N, H, Tk, K) and values (N, H, Tk, E),
  // of which the first lengths[n] are visible. Writes ctx (N, H * E).
  auto attend = [&](const TensorView& keys, const TensorView& values, int64_t tk, int lengths_id) {
    const TensorView probs = prefix(view(i.scores), {N, H, 1, tk});
    ops::GemmOptions qk;
    qk.trans_b = true;
    qk.alpha = scale;
    ops::gemm(view(i.q).reshape({N * H, 1, K}), keys.reshape({N * H, tk, K}),
              probs.reshape({N * H, 1, tk}), qk, st);
    ops::softmax_forward(probs, view(lengths_id), false, probs, st);
    ops::gemm(probs.reshape({N * H, 1, tk}), values.reshape({N * H, tk, E}),
              view(i.ctx).reshape({N * H, 1, E}), {}, st);
  };
  auto input_of = [&](NormIds norm, const TensorView& xin) {
    if (!c.pre_norm) return xin;
    ops::layernorm_forward(xin, model_.param(norm.gamma), model_.param(norm.beta), c.layer_norm_eps,
                           view(i.h), view(i.mean), view(i.rstd), st);
    return view(i.h);
  };
  auto end = [&](NormIds norm, const TensorView& residual, const TensorView& out) {
    if (c.pre_norm) {
      ops::add_dropout_forward(residual, view(i.s), 0.0f, {}, out, st);
    } else {
      ops::add_dropout_layernorm_forward(residual, view(i.s), 0.0f, {}, model_.param(norm.gamma),
                                         model_.param(norm.beta), c.layer_norm_eps, view(i.h),
                                         out, view(i.mean), view(i.rstd), st);
    }
  };

  for (int64_t l = 0; l < c.layers; ++l) {
    const DecoderLayerIds& w = L.decoder[static_cast<size_t>(l)];
    // Self-attention over the cache, after appending this position.
    TensorView in = input_of(w.self_attn_norm, x);
    model::linear_forward(m, in, w.self_attn.q, view(i.q));
    model::linear_forward(m, in, w.self_attn.k, view(i.k_new));
    model::linear_forward(m, in, w.self_attn.v, view(i.v_new));
    const TensorView ck = view(i.cache_k[static_cast<size_t>(l)]);
    const TensorView cv = view(i.cache_v[static_cast<size_t>(l)]);
    device_copy_2d(static_cast<char*>(ck.data()) + t_ * K * el, max_steps_ * K * el,
                   view(i.k_new).data(), K * el, K * el, static_cast<size_t>(N * H), ck.device(),
                   st.native());
    device_copy_2d(static_cast<char*>(cv.data()) + t_ * E * el, max_steps_ * E * el,
                   view(i.v_new).data(), E * el, E * el, static_cast<size_t>(N * H), cv.device(),
                   st.native());
    attend(ck, cv, max_steps_, i.self_lengths);
    model::linear_forward(m, view(i.ctx), w.self_attn.out, view(i.s));
    end(w.self_attn_norm, x, view(i.y_a));

    // Attention over the source.
    in = input_of(w.cross_attn_norm, view(i.y_a));
    model::linear_forward(m, in, w.cross_attn.q, view(i.q));
    attend(prefix(view(i.cross_k[static_cast<size_t>(l)]), {N, H, S_, K}),
           prefix(view(i.cross_v[static_cast<size_t>(l)]), {N, H, S_, E}), S_, i.src_lengths);
    model::linear_forward(m, view(i.ctx), w.cross_attn.out, view(i.s));
    end(w.cross_attn_norm, view(i.y_a), view(i.y_b));

    // Feed-forward.
    in = input_of(w.ffn_norm, view(i.y_b));
    model::linear_forward(m, in, w.ffn.fc1, view(i.f), /*relu=*/true);
    model::linear_forward(m, view(i.f), w.ffn.fc2, view(i.s));
    end(w.ffn_norm, view(i.y_b), x);
  }
  if (c.pre_norm) {
    ops::layernorm_forward(x, model_.param(L.decoder_norm.gamma), model_.param(L.decoder_norm.beta),
                           c.layer_norm_eps, view(i.h), view(i.mean), view(i.rstd), st);
    x = view(i.h);
  }
  ops::GemmOptions tb;
  tb.trans_b = true;
  ops::gemm(x, model_.weight(L.tgt_embed), view(i.logits), tb, st);
  ops::log_softmax(view(i.logits), view(i.logits), st);
  ++t_;
  return view(i.logits);
}

}  // namespace tfm
