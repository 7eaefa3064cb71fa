#include "libcore/model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "libcore/base/phases.h"
#include "libcore/model/int8.h"
#include "libcore/model/layers.h"
#include "libcore/model/plan.h"

namespace tfm {

using model::AttentionPlanIds;
using model::AttentionSaved;
using model::AttentionShape;
using model::DecoderLayerPlan;
using model::EncoderLayerPlan;
using model::SublayerIds;
using model::prefix;
using model::rows;

namespace {

// Where dropout draws a mask: each site is one RNG stream (its key's id,
// libcore/base/rng.h), so no two draw the same mask. The numbers are part of a
// run's randomness (a resumed run draws what the first would have): keep
// them. A site of the decoder may share its number with one of the encoder;
// the stack tells them apart.
enum class Stack { encoder = 0, decoder = 1 };
enum class Site {
  embedding = 0,             // the embedded input (layer 0 of its stack)
  self_attention = 1,        // a block's self-attention weights
  self_attention_out = 2,    // its self-attention sub-layer's output
  encoder_ffn_out = 3,       // an encoder block's feed-forward output
  cross_attention = 3,       // a decoder block's weights over the source
  cross_attention_out = 4,   // its cross-attention sub-layer's output
  decoder_ffn_out = 5,       // its feed-forward output
};
// layer: 0 for the embedding, l + 1 for block l.
uint32_t site(Stack stack, int64_t layer, Site which) {
  return static_cast<uint32_t>((static_cast<int>(stack) * 65536 + layer) * 8 + static_cast<int>(which));
}

// The room of the attention buffers: R rows of heads and R x L elements of
// a head's maps hold any batch at its own lengths (B x T <= R, T <= L). On
// CUDA, where attention_tiles (upload.cc) pads the tiles to multiples of 8
// when they fit, room for a batch of R / L sentences all of the longest
// length L padded to up8(L) (L = 26: 23% more rows, 52% more map elements;
// L = 250: 2% and 5%), and head rows 5/4 of R at least, for shorter ones.
Transformer::Plan::TileRoom tile_room(const ModelLimits& lim, const Device& device) {
  const int64_t R = lim.max_tokens, L = lim.max_len;
  if (!device.is_cuda()) return {R, R * L};
  const int64_t Lp = (L + 7) / 8 * 8;
  return {std::max(R * 5 / 4, (R * Lp + L - 1) / L), (R * Lp * Lp + L - 1) / L};
}

}  // namespace

Transformer::Transformer(const ModelConfig& config, const ModelLimits& limits, Device device,
                         DType dtype)
    : ModelWeights(config, device, dtype), limits_(limits) {
  TFM_REQUIRE(limits.max_tokens >= 1 && limits.max_len >= 1 && limits.loss_chunk >= 1,
              "model limits must be positive (max_tokens {}, max_len {}, loss_chunk {})",
              limits.max_tokens, limits.max_len, limits.loss_chunk);
  TFM_REQUIRE(limits.max_len <= config_.max_positions,
              "max_len {} is over the {} positions the model has (max_positions)", limits.max_len,
              config_.max_positions);
  plan_ = std::make_unique<Plan>(config_, limits_, dtype_, param_dtype_, layout_.total(),
                                 tile_room(limits_, device));
  memory_ = std::make_unique<PlannedMemory>(plan_->mem, device);
  try {
    ops::check_library_memory(device);
  } catch (const Error& e) {
    throw Error(fmt::format("{}; the plan needs {}", e.what(), plan_->mem.report()));
  }
  if (!config_.learned_positions) {
    Tensor table = sinusoid_table(config_, limits_.max_len, param_dtype_);
    positions_ = Tensor(table.shape(), param_dtype_, device);
    copy(positions_, table, *stream_);
  }
  // src, tgt_in, tgt_out: R each; the lengths: B <= R each; the offsets: B + 1 each.
  staging_ = std::make_unique<HostStaging>((7 * static_cast<size_t>(limits_.max_tokens) + 2) * sizeof(int32_t),
                                           *stream_);
  readback_ = std::make_unique<HostReadback>(4 * sizeof(double), 3, *stream_);
  const TensorView control = memory_->view(plan_->control);
  device_memset_zero(control.data(), device_, control.bytes(), *stream_);
  zero_grads();
  const auto [m, v] = optimizer_state();
  device_memset_zero(m.data(), device_, m.bytes(), *stream_);
  device_memset_zero(v.data(), device_, v.bytes(), *stream_);
}

Transformer::~Transformer() = default;

TensorView Transformer::grads() const { return memory_->view(plan_->grads); }
std::pair<TensorView, TensorView> Transformer::optimizer_state() const {
  return {memory_->view(plan_->adam_m), memory_->view(plan_->adam_v)};
}

namespace {
// The weights' plan and the passes' as one, for the report and the total.
MemoryPlan joined(const MemoryPlan& a, const MemoryPlan& b) {
  MemoryPlan out = a;
  for (const MemoryPlan::Entry& e : b.entries()) out.add(e.kind, e.name, e.dtype, e.shape);
  return out;
}
}  // namespace

std::string Transformer::memory_report() const { return report_with(joined(weights_plan(), plan_->mem)); }

size_t Transformer::memory_bytes() const { return weights_plan().total() + plan_->mem.total(); }

void Transformer::zero_grads() {
  phases::mark(*stream_, "zero gradients");
  const TensorView g = grads();
  device_memset_zero(g.data(), device_, g.bytes(), *stream_);
  const TensorView u = memory_->view(plan_->update);
  device_memset_zero(u.data(), device_, u.bytes(), *stream_);
  update_tokens_ = 0;
}

std::vector<GradientPiece> Transformer::gradient_order() const {
  const ParamLayout& L = layout_;
  const auto start = [&](int id) { return L.entry(id).offset; };
  const int64_t encoder_layers = config_.encoder_layers, decoder_layers = config_.decoder_layers;
  // After the decoder's layers: the final norms (pre-norm), then the
  // output layer's own weights (untied, biased), whose gradients the loss
  // writes before backward starts: they complete with the last piece.
  const int64_t final_norms = config_.pre_norm ? start(L.encoder_norm.gamma) : -1;
  const int64_t output = L.out_proj != L.tgt_embed ? start(L.out_proj) : L.out_bias >= 0 ? start(L.out_bias) : L.total();
  const int64_t tail = final_norms >= 0 ? final_norms : output;
  const auto encoder_layer = [&](int64_t l) {
    const int64_t end = l + 1 < encoder_layers ? start(L.encoder[static_cast<size_t>(l + 1)].self_attn.q.weight)
                                               : start(L.decoder[0].self_attn.q.weight);
    return GradientPiece{start(L.encoder[static_cast<size_t>(l)].self_attn.q.weight), end};
  };
  const auto decoder_layer = [&](int64_t l) {
    const int64_t end =
        l + 1 < decoder_layers ? start(L.decoder[static_cast<size_t>(l + 1)].self_attn.q.weight) : tail;
    return GradientPiece{start(L.decoder[static_cast<size_t>(l)].self_attn.q.weight), end};
  };
  std::vector<GradientPiece> order;
  for (int64_t l = decoder_layers - 1; l >= 0; --l) order.push_back(decoder_layer(l));
  if (config_.pre_norm) order.push_back({final_norms, output});
  for (int64_t l = encoder_layers - 1; l >= 0; --l) order.push_back(encoder_layer(l));
  order.push_back({0, start(L.encoder[0].self_attn.q.weight)});
  if (output < L.total()) order.push_back({output, L.total()});
  return order;
}

namespace detail {

// Runs one model pass over a model's planned memory, for the batch it
// uploaded last. Forward and backward walk the same structure in opposite
// orders. Built from the model alone (a friend of Transformer), in one place.
class Pass {
 public:
  Pass(const Transformer& t, const TrainStep& step)
      : config_(t.config_), layout_(t.layout_), plan_(*t.plan_), memory_(*t.memory_), stream_(*t.stream_),
        positions_(t.positions_.view()), B_(t.B_), S_(t.S_), T_(t.T_), Ns_(t.Ns_), Nt_(t.Nt_), Sa_(t.Sa_),
        Ta_(t.Ta_), step_(step), master_(t.params()),
        blocks_{stream_, config_, layout_, t.weights(), memory_.view(plan_.grads),
                {memory_.view(plan_.proj), memory_.view(plan_.scores), memory_.view(plan_.split),
                 memory_.view(plan_.dq), memory_.view(plan_.dk), memory_.view(plan_.dv),
                 memory_.view(plan_.dprobs), memory_.view(plan_.dproj)},
                step.tf32} {
    blocks_.int8 = t.int8_.get();
  }

  TensorView buffer(int id, Shape s) const { return prefix(memory_.view(id), s); }
  // logits = y E^T (+ b), the output projection of decoder output rows y.
  void logits(const TensorView& y, const TensorView& out) const {
    model::output_projection(blocks_, y, blocks_.p(layout_.out_proj), out,
                             layout_.out_bias >= 0 ? master(layout_.out_bias) : TensorView());
  }
  float p_drop() const { return step_.dropout ? config_.dropout : 0.0f; }
  float p_attn() const { return step_.dropout ? config_.attention_dropout : 0.0f; }
  RngKey key(uint32_t site_id) const { return {step_.seed, site_id, step_.rng_step}; }
  // Packed token rows of the source and target sides.
  int64_t source_rows() const { return Ns_; }
  int64_t target_rows() const { return Nt_; }
  TensorView src_offsets() const { return buffer(plan_.src_offsets, {B_ + 1}); }
  TensorView tgt_offsets() const { return buffer(plan_.tgt_offsets, {B_ + 1}); }

  // The f32 master of a parameter that is not a GEMM operand (embedding
  // tables, positions, layer-norm gains and biases: ops take them in f32).
  TensorView master(int id) const { return layout_.view(master_, id); }

  TensorView positions(int pos_id) const {
    return pos_id >= 0 ? master(pos_id) : positions_;
  }

  TensorView encoder_output() const {
    return config_.pre_norm ? buffer(plan_.enc_final.y, {source_rows(), config_.d_model})
                            : buffer(plan_.enc.back().b.y, {source_rows(), config_.d_model});
  }
  TensorView decoder_output() const {
    return config_.pre_norm ? buffer(plan_.dec_final.y, {target_rows(), config_.d_model})
                            : buffer(plan_.dec.back().c.y, {target_rows(), config_.d_model});
  }

  TensorView encode() {
    embed(Stack::encoder, plan_.src, plan_.enc_in, layout_.src_embed, layout_.src_pos, S_, src_offsets(),
          source_rows());
    TensorView x = buffer(plan_.enc_in, {source_rows(), config_.d_model});
    for (int64_t l = 0; l < config_.encoder_layers; ++l) x = encoder_layer(l, x);
    if (config_.pre_norm) x = final_norm(plan_.enc_final, layout_.encoder_norm, x);
    return x;
  }

  void forward() {
    phases::mark(stream_, "encoder forward");
    const TensorView enc_out = encode();
    phases::mark(stream_, "decoder forward");
    embed(Stack::decoder, plan_.tgt_in, plan_.dec_in, layout_.tgt_embed, layout_.tgt_pos, T_, tgt_offsets(),
          target_rows());
    TensorView x = buffer(plan_.dec_in, {target_rows(), config_.d_model});
    for (int64_t l = 0; l < config_.decoder_layers; ++l) x = decoder_layer(l, x, enc_out);
    if (config_.pre_norm) final_norm(plan_.dec_final, layout_.decoder_norm, x);
  }

  // g: d loss / d decoder output, (B*T, D); consumed. With a sink, each
  // piece of the gradient is announced as it completes, in the order of
  // Transformer::gradient_order().
  void backward(const TensorView& g_top) {
    const int64_t D = config_.d_model;
    int piece = 0;
    const auto done = [&] {
      if (step_.sink) step_.sink->ready(piece);
      ++piece;
    };
    phases::mark(stream_, "decoder backward");
    TensorView g = g_top;
    const TensorView g_enc = buffer(plan_.g_enc, {source_rows(), D});
    device_memset_zero(g_enc.data(), g_enc.device(), g_enc.bytes(), stream_);
    if (config_.pre_norm)
      final_norm_backward(plan_.dec_final, layout_.decoder_norm, decoder_block_input(config_.decoder_layers), g);
    const TensorView enc_out = encoder_output();
    for (int64_t l = config_.decoder_layers - 1; l >= 0; --l) {
      decoder_layer_backward(l, g, enc_out, g_enc);
      done();
    }
    embed_backward(Stack::decoder, plan_.tgt_in, layout_.tgt_embed, layout_.tgt_pos, T_, tgt_offsets(), g);

    phases::mark(stream_, "encoder backward");
    if (config_.pre_norm) {
      final_norm_backward(plan_.enc_final, layout_.encoder_norm, encoder_block_input(config_.encoder_layers), g_enc);
      done();  // both final norms
    }
    for (int64_t l = config_.encoder_layers - 1; l >= 0; --l) {
      encoder_layer_backward(l, g_enc);
      done();
    }
    embed_backward(Stack::encoder, plan_.src, layout_.src_embed, layout_.src_pos, S_, src_offsets(), g_enc);
    done();
    if (layout_.out_proj != layout_.tgt_embed || layout_.out_bias >= 0) done();  // the output layer's own
  }

 private:
  // ------------------------------------------------------------ embeddings
  // x = dropout(sqrt(D) * E[ids] + PE[t]) (the scale 1 without
  // scale_embeddings): computed on the padded (B, len)
  // grid of the uploaded ids, then packed into the n rows of x.
  void embed(Stack stack, int ids_id, int out_id, int embed_id, int pos_id, int64_t len,
             const TensorView& offsets, int64_t n) {
    const int64_t R = B_ * len, D = config_.d_model;
    const TensorView padded = buffer(plan_.padded, {R, D});
    ops::embedding_forward(buffer(ids_id, {R}), master(embed_id), embed_scale(), padded, stream_);
    ops::position_add(padded.reshape({B_, len, D}), positions(pos_id), 0, stream_);
    const TensorView x = buffer(out_id, {n, D});
    ops::pack_heads(padded.reshape({B_, 1, len, D}), offsets, x, stream_);
    ops::dropout_forward(x, p_drop(), key(site(stack, 0, Site::embedding)), x, stream_);
  }
  void embed_backward(Stack stack, int ids_id, int embed_id, int pos_id, int64_t len,
                      const TensorView& offsets, const TensorView& g) {
    const int64_t R = B_ * len, D = config_.d_model;
    ops::dropout_backward(g, p_drop(), key(site(stack, 0, Site::embedding)), g, stream_);
    const TensorView padded = buffer(plan_.padded, {R, D});  // zeros at the padding
    ops::unpack_heads(g, offsets, padded.reshape({B_, 1, len, D}), stream_);
    if (pos_id >= 0) ops::position_backward(padded.reshape({B_, len, D}), 0, blocks_.g(pos_id), stream_);
    ops::embedding_backward(buffer(ids_id, {R}), padded, embed_scale(), blocks_.g(embed_id), stream_);
  }
  float embed_scale() const { return embedding_scale(config_); }

  // ------------------------------------------------------- sub-layer ends
  // The forward pieces are model::sublayer_input, sublayer_end and
  // final_norm (layers.h), shared with the decoder; here, their buffers.
  model::Norm norm_params(NormIds norm) const {
    return {master(norm.gamma), master(norm.beta), config_.layer_norm_eps};
  }
  model::NormBuffers norm_buffers(const SublayerIds& ids, const TensorView& x) const {
    const int64_t R = x.dim(0);
    return {buffer(ids.h, x.shape()), buffer(ids.mean, {R}), buffer(ids.rstd, {R})};
  }
  TensorView sublayer_input(const SublayerIds& ids, NormIds norm, const TensorView& x) {
    return model::sublayer_input(blocks_, norm_params(norm), x, norm_buffers(ids, x));
  }
  // Block output from the residual x and the sub-layer output s.
  TensorView sublayer_end(const SublayerIds& ids, NormIds norm, const TensorView& x,
                          const TensorView& s, uint32_t site_id) {
    const TensorView y = buffer(ids.y, x.shape());
    model::sublayer_end(blocks_, norm_params(norm), x, s, p_drop(), key(site_id), norm_buffers(ids, x), y);
    return y;
  }
  // g: d/d(block output) in, d/d(residual x) out (in place). Returns ds,
  // and where the sub-layer's input gradient goes (with its beta).
  struct SublayerGrads { TensorView ds, d_input; float beta; };
  SublayerGrads sublayer_end_backward(const SublayerIds& ids, NormIds norm, const TensorView& g,
                                      uint32_t site_id) {
    const int64_t R = g.dim(0);
    const TensorView ds = buffer(plan_.ds, g.shape());
    if (config_.pre_norm) {
      ops::dropout_backward(g, p_drop(), key(site_id), ds, stream_);
      return {ds, buffer(plan_.dln, g.shape()), 0.0f};
    }
    ops::add_dropout_layernorm_backward(buffer(ids.h, g.shape()), master(norm.gamma), buffer(ids.mean, {R}),
                                        buffer(ids.rstd, {R}), g, p_drop(), key(site_id), g, ds,
                                        blocks_.g(norm.gamma), blocks_.g(norm.beta), stream_);
    return {ds, g, 1.0f};
  }
  // Pre-norm only: the sub-layer's input gradient (in dln) through its
  // LayerNorm, added to g. x is the block's residual input.
  void sublayer_input_backward(const SublayerIds& ids, NormIds norm, const TensorView& x,
                               const TensorView& g) {
    if (!config_.pre_norm) return;
    const int64_t R = x.dim(0);
    const TensorView dln = buffer(plan_.dln, x.shape());
    ops::layernorm_backward(x, master(norm.gamma), buffer(ids.mean, {R}), buffer(ids.rstd, {R}), dln, dln,
                            blocks_.g(norm.gamma), blocks_.g(norm.beta), stream_);
    ops::add(g, dln, g, stream_);
  }

  TensorView final_norm(const SublayerIds& ids, NormIds norm, const TensorView& x) {
    const TensorView y = buffer(ids.y, x.shape());
    model::final_norm(blocks_, norm_params(norm), x, norm_buffers(ids, x), y);
    return y;
  }
  void final_norm_backward(const SublayerIds& ids, NormIds norm, const TensorView& x,
                           const TensorView& g) {
    const int64_t R = x.dim(0);
    ops::layernorm_backward(x, master(norm.gamma), buffer(ids.mean, {R}), buffer(ids.rstd, {R}), g, g,
                            blocks_.g(norm.gamma), blocks_.g(norm.beta), stream_);
  }

  // ------------------------------------------------------------ attention
  AttentionSaved saved(const AttentionPlanIds& a, const AttentionShape& s) const {
    const int64_t H = config_.heads;
    return {buffer(a.q, {B_, H, s.tile_q, config_.d_k}), buffer(a.k, {B_, H, s.tile_k, config_.d_k}),
            buffer(a.v, {B_, H, s.tile_k, config_.d_v}), buffer(a.probs, {B_, H, s.tile_q, s.tile_k}),
            buffer(a.ctx, {s.nq, H * config_.d_v})};
  }
  // Self-attention of a stack, or the decoder's
  // attention over the source (cross).
  AttentionShape self_shape(Stack stack, bool causal, uint32_t site_id) const {
    const int64_t len = stack == Stack::encoder ? S_ : T_, tile = stack == Stack::encoder ? Sa_ : Ta_;
    const int64_t n = stack == Stack::encoder ? source_rows() : target_rows();
    const TensorView off = stack == Stack::encoder ? src_offsets() : tgt_offsets();
    const int lengths = stack == Stack::encoder ? plan_.src_lengths : plan_.tgt_lengths;
    return {B_, len, len, tile, tile, n, n, off, off, buffer(lengths, {B_}), causal, p_attn(),
            key(site_id)};
  }
  AttentionShape cross_shape(uint32_t site_id) const {
    return {B_, T_, S_, Ta_, Sa_, target_rows(), source_rows(), tgt_offsets(), src_offsets(),
            buffer(plan_.src_lengths, {B_}), false, p_attn(), key(site_id)};
  }

  // ------------------------------------------------------------------ FFN
  // f_id keeps ReLU's output, or another activation's input (whose output
  // goes to the workspace, and is recomputed there for backward).
  bool relu() const { return config_.activation == ops::Activation::relu; }
  void ffn_forward(FfnIds w, int f_id, const TensorView& in, const TensorView& s) {
    const Shape shape{in.dim(0), config_.d_ff};
    if (relu())
      model::ffn_forward(blocks_, w, in, buffer(f_id, shape), s);
    else
      model::ffn_forward(blocks_, w, in, buffer(plan_.activated, shape), s, buffer(f_id, shape));
  }
  void ffn_backward(FfnIds w, int f_id, const TensorView& in, const TensorView& ds,
                    const TensorView& d_in, float beta) {
    const int64_t R = in.dim(0);
    const TensorView saved = buffer(f_id, {R, config_.d_ff});
    const TensorView df = buffer(plan_.df, {R, config_.d_ff});
    if (relu()) {
      model::linear_backward(blocks_, saved, w.fc2, ds, df, 0.0f);
      ops::relu_backward(saved, df, df, stream_);
    } else {
      const TensorView f = buffer(plan_.activated, {R, config_.d_ff});
      ops::activation_forward(saved, config_.activation, f, stream_);
      model::linear_backward(blocks_, f, w.fc2, ds, df, 0.0f);
      ops::activation_backward(saved, df, config_.activation, df, stream_);
    }
    model::linear_backward(blocks_, in, w.fc1, df, d_in, beta);
  }

  // The running input of block l of each stack (what backward recomputes from).
  TensorView encoder_block_input(int64_t l) const {
    return l == 0 ? buffer(plan_.enc_in, {source_rows(), config_.d_model})
                  : buffer(plan_.enc[l - 1].b.y, {source_rows(), config_.d_model});
  }
  TensorView decoder_block_input(int64_t l) const {
    return l == 0 ? buffer(plan_.dec_in, {target_rows(), config_.d_model})
                  : buffer(plan_.dec[l - 1].c.y, {target_rows(), config_.d_model});
  }

  // ------------------------------------------------------ sub-layer blocks
  // A sub-layer of block l of a stack from its running input x: the input
  // (pre-norm: normalized), the sub-layer, its end (dropout, residual,
  // post-norm). Returns the running output. Backward: g is d/d(output) in
  // and d/d(x) out, in place.
  static Site ffn_site(Stack stack) { return stack == Stack::encoder ? Site::encoder_ffn_out : Site::decoder_ffn_out; }
  AttentionShape self_attention_shape(Stack stack, int64_t l) const {
    return self_shape(stack, /*causal=*/stack == Stack::decoder, site(stack, l + 1, Site::self_attention));
  }

  TensorView self_attention_block(Stack stack, int64_t l, AttentionIds w, NormIds norm,
                                  const AttentionPlanIds& ids, const SublayerIds& sub, const TensorView& x) {
    const TensorView s = buffer(plan_.s, x.shape());
    const TensorView in = sublayer_input(sub, norm, x);
    const AttentionShape a = self_attention_shape(stack, l);
    model::attention_forward(blocks_, w, a, in, in, saved(ids, a), s);
    return sublayer_end(sub, norm, x, s, site(stack, l + 1, Site::self_attention_out));
  }
  void self_attention_block_backward(Stack stack, int64_t l, AttentionIds w, NormIds norm,
                                     const AttentionPlanIds& ids, const SublayerIds& sub, const TensorView& x,
                                     const TensorView& g) {
    const SublayerGrads d = sublayer_end_backward(sub, norm, g, site(stack, l + 1, Site::self_attention_out));
    const TensorView in = config_.pre_norm ? buffer(sub.h, x.shape()) : x;
    const AttentionShape a = self_attention_shape(stack, l);
    model::attention_backward(blocks_, w, a, in, in, saved(ids, a), d.ds, d.d_input, d.beta, d.d_input);
    sublayer_input_backward(sub, norm, x, g);
  }

  TensorView ffn_block(Stack stack, int64_t l, FfnIds w, NormIds norm, int f_id, const SublayerIds& sub,
                       const TensorView& x) {
    const TensorView s = buffer(plan_.s, x.shape());
    ffn_forward(w, f_id, sublayer_input(sub, norm, x), s);
    return sublayer_end(sub, norm, x, s, site(stack, l + 1, ffn_site(stack)));
  }
  void ffn_block_backward(Stack stack, int64_t l, FfnIds w, NormIds norm, int f_id, const SublayerIds& sub,
                          const TensorView& x, const TensorView& g) {
    const SublayerGrads d = sublayer_end_backward(sub, norm, g, site(stack, l + 1, ffn_site(stack)));
    ffn_backward(w, f_id, config_.pre_norm ? buffer(sub.h, x.shape()) : x, d.ds, d.d_input, d.beta);
    sublayer_input_backward(sub, norm, x, g);
  }

  // --------------------------------------------------------------- layers
  TensorView encoder_layer(int64_t l, const TensorView& x) {
    const EncoderLayerIds& w = layout_.encoder[static_cast<size_t>(l)];
    const EncoderLayerPlan& p = plan_.enc[static_cast<size_t>(l)];
    const TensorView y_a = self_attention_block(Stack::encoder, l, w.self_attn, w.self_attn_norm, p.attn, p.a, x);
    return ffn_block(Stack::encoder, l, w.ffn, w.ffn_norm, p.f, p.b, y_a);
  }

  void encoder_layer_backward(int64_t l, const TensorView& g) {
    const EncoderLayerIds& w = layout_.encoder[static_cast<size_t>(l)];
    const EncoderLayerPlan& p = plan_.enc[static_cast<size_t>(l)];
    const TensorView x = encoder_block_input(l);
    const TensorView y_a = buffer(p.a.y, x.shape());
    ffn_block_backward(Stack::encoder, l, w.ffn, w.ffn_norm, p.f, p.b, y_a, g);
    self_attention_block_backward(Stack::encoder, l, w.self_attn, w.self_attn_norm, p.attn, p.a, x, g);
  }

  TensorView decoder_layer(int64_t l, const TensorView& x, const TensorView& enc_out) {
    const DecoderLayerIds& w = layout_.decoder[static_cast<size_t>(l)];
    const DecoderLayerPlan& p = plan_.dec[static_cast<size_t>(l)];
    const TensorView y_a =
        self_attention_block(Stack::decoder, l, w.self_attn, w.self_attn_norm, p.self_attn, p.a, x);
    // Attention over the source.
    const TensorView s = buffer(plan_.s, x.shape());
    const TensorView in_b = sublayer_input(p.b, w.cross_attn_norm, y_a);
    const AttentionShape ca = cross_shape(site(Stack::decoder, l + 1, Site::cross_attention));
    model::attention_forward(blocks_, w.cross_attn, ca, in_b, enc_out, saved(p.cross_attn, ca), s);
    const TensorView y_b =
        sublayer_end(p.b, w.cross_attn_norm, y_a, s, site(Stack::decoder, l + 1, Site::cross_attention_out));
    return ffn_block(Stack::decoder, l, w.ffn, w.ffn_norm, p.f, p.c, y_b);
  }

  void decoder_layer_backward(int64_t l, const TensorView& g, const TensorView& enc_out,
                              const TensorView& g_enc) {
    const DecoderLayerIds& w = layout_.decoder[static_cast<size_t>(l)];
    const DecoderLayerPlan& p = plan_.dec[static_cast<size_t>(l)];
    const TensorView x = decoder_block_input(l);
    const TensorView y_a = buffer(p.a.y, x.shape()), y_b = buffer(p.b.y, x.shape());
    ffn_block_backward(Stack::decoder, l, w.ffn, w.ffn_norm, p.f, p.c, y_b, g);

    const SublayerGrads b = sublayer_end_backward(p.b, w.cross_attn_norm, g,
                                                  site(Stack::decoder, l + 1, Site::cross_attention_out));
    const TensorView in_b = config_.pre_norm ? buffer(p.b.h, x.shape()) : y_a;
    const AttentionShape ca = cross_shape(site(Stack::decoder, l + 1, Site::cross_attention));
    model::attention_backward(blocks_, w.cross_attn, ca, in_b, enc_out, saved(p.cross_attn, ca), b.ds,
                              b.d_input, b.beta, g_enc);
    sublayer_input_backward(p.b, w.cross_attn_norm, y_a, g);

    self_attention_block_backward(Stack::decoder, l, w.self_attn, w.self_attn_norm, p.self_attn, p.a, x, g);
  }

  const ModelConfig& config_;
  const ParamLayout& layout_;
  const Transformer::Plan& plan_;
  const PlannedMemory& memory_;
  const Stream& stream_;
  TensorView positions_;
  int64_t B_, S_, T_, Ns_, Nt_, Sa_, Ta_;
  TrainStep step_;
  TensorView master_;
  model::Blocks blocks_;
};

}  // namespace detail

using detail::Pass;

void Transformer::forward(const TrainStep& step) { Pass(*this, step).forward(); }

void Transformer::backward(const TrainStep& step) {
  Pass pass(*this, step);
  pass.backward(prefix(memory_->view(plan_->g_dec), {Nt_, config_.d_model}));
}

// The shared output projection and the label-smoothed loss, chunk by chunk
// over target rows, so that only (chunk, V) logits ever exist. With grads,
// the loss writes d loss / d logits (in place, or into the compute dtype's
// copy), which flows into the decoder output's gradient (g_dec) and into the
// embedding's gradient.
void Transformer::output_loss(const TrainStep& step, bool with_grads, const TensorView& sums) {
  TFM_REQUIRE(!with_grads || (!int8_ && !packed_),
              "a model quantized to int8 or packed for the CPU's decoder is for inference: it does not train");
  phases::mark(*stream_, with_grads ? "output layer and loss, with gradients" : "output layer and loss");
  Pass pass(*this, step);
  const TensorView y = pass.decoder_output();
  const TensorView E = weight(layout_.out_proj), dE = grad(layout_.out_proj);
  const TensorView targets = prefix(memory_->view(plan_->tgt_out), {Nt_});
  const TensorView g = prefix(memory_->view(plan_->g_dec), {Nt_, config_.d_model});
  const int64_t R = Nt_, chunk = memory_->view(plan_->logits).dim(0);
  for (int64_t r0 = 0; r0 < R; r0 += chunk) {
    const int64_t n = std::min(chunk, R - r0);
    const TensorView logits = prefix(memory_->view(plan_->logits), {n, config_.vocab_size});
    pass.logits(rows(y, r0, n), logits);
    const TensorView t = TensorView(static_cast<int32_t*>(targets.data()) + r0, DType::i32, {n}, device_);
    // d loss / d logits, written by the loss in the compute dtype of the two
    // GEMMs that read it (in place when that is the logits' own).
    const TensorView dlogits = plan_->logits16 != plan_->logits
                                   ? prefix(memory_->view(plan_->logits16), logits.shape())
                                   : logits;
    ops::smoothed_cross_entropy(logits, t, config_.label_smoothing, step.grad_scale, sums, *stream_,
                                dlogits);
    if (!with_grads) continue;
    ops::GemmOptions nn;
    nn.tf32 = step.tf32;
    ops::gemm(dlogits, E, rows(g, r0, n), nn, *stream_);
    ops::GemmOptions ta;
    ta.trans_a = true;
    ta.beta = 1.0f;
    ta.tf32 = step.tf32;
    ops::gemm(dlogits, rows(y, r0, n), dE, ta, *stream_);
    if (layout_.out_bias >= 0) ops::sum_rows(dlogits, grad(layout_.out_bias), *stream_);
  }
}

namespace {
// The first n values of a small f32 or f64 device tensor, on the host
// (the copy waits for the stream).
std::vector<double> read_back(const TensorView& t, int64_t n, const Stream& stream) {
  std::vector<double> out(static_cast<size_t>(n));
  if (t.dtype() == DType::f64) {
    copy(TensorView(out.data(), DType::f64, {n}), prefix(t, {n}), stream);
  } else {
    std::vector<float> f(static_cast<size_t>(n));
    copy(TensorView(f.data(), DType::f32, {n}), prefix(t, {n}), stream);
    std::copy(f.begin(), f.end(), out.begin());
  }
  return out;
}
}  // namespace

void Transformer::accumulate(const HostBatch& batch, const TrainStep& step) {
  phases::mark(*stream_, "batch upload");
  upload(batch);
  forward(step);
  output_loss(step, true, prefix(memory_->view(plan_->update), {2}));
  backward(step);
  update_tokens_ += tokens_;
}

LossSums Transformer::forward_backward(const HostBatch& batch, const TrainStep& step) {
  upload(batch);
  forward(step);
  const TensorView sums = memory_->view(plan_->sums), update = prefix(memory_->view(plan_->update), {2});
  device_memset_zero(sums.data(), device_, sums.bytes(), *stream_);
  output_loss(step, true, sums);
  ops::add(update, sums, update, *stream_);
  backward(step);
  update_tokens_ += tokens_;
  const std::vector<double> host = read_back(sums, 2, *stream_);
  return {host[0], host[1], tokens_};
}

void Transformer::finish_update() {
  phases::mark(*stream_, "gradient norm");
  const TensorView update = update_sums();  // {loss, nll, sum of squares}
  const TensorView squares(static_cast<char*>(update.data()) + 2 * dtype_size(update.dtype()),
                           update.dtype(), {1}, device_);
  ops::sum_squares(grads(), squares, *stream_);
}

TensorView Transformer::update_sums() const {
  return memory_->view(plan_->update);
}

TensorView Transformer::update_control() const {
  return memory_->view(plan_->control);
}

UpdateTicket Transformer::send_update() {
  const TensorView applied = prefix(update_control(), {1});
  const TensorView parts[] = {update_sums(), applied};
  return {readback_->download(parts), update_tokens_};
}

bool Transformer::update_arrived(const UpdateTicket& ticket) const { return readback_->ready(ticket.slot); }

UpdateSums Transformer::receive_update(const UpdateTicket& ticket) {
  const char* bytes = readback_->read(ticket.slot);
  const TensorView sums = update_sums();
  double v[3];
  for (int i = 0; i < 3; ++i) {
    if (sums.dtype() == DType::f64) {
      std::memcpy(&v[i], bytes + i * sizeof(double), sizeof(double));
    } else {
      float f;
      std::memcpy(&f, bytes + i * sizeof(float), sizeof(float));
      v[i] = f;
    }
  }
  // The decision's `applied` (1 or 0), in the sums' dtype.
  const bool applied = std::any_of(bytes + sums.bytes(), bytes + sums.bytes() + dtype_size(sums.dtype()),
                                   [](char b) { return b != 0; });
  return {{v[0], v[1], ticket.tokens}, v[2], applied};
}

LossSums Transformer::evaluate(const HostBatch& batch) {
  TrainStep step;
  step.dropout = false;
  upload(batch);
  forward(step);
  const TensorView sums = memory_->view(plan_->sums);
  device_memset_zero(sums.data(), device_, sums.bytes(), *stream_);
  output_loss(step, false, sums);
  const std::vector<double> host = read_back(sums, 2, *stream_);
  return {host[0], host[1], tokens_};
}

TensorView Transformer::encode(const HostBatch& batch) {
  TrainStep step;
  step.dropout = false;
  upload(batch);
  const TensorView packed = Pass(*this, step).encode();
  // Back to the padded layout callers index by (sentence, position).
  const TensorView out = prefix(memory_->view(plan_->padded), {B_ * S_, config_.d_model});
  ops::unpack_heads(packed, prefix(memory_->view(plan_->src_offsets), {B_ + 1}),
                    out.reshape({B_, 1, S_, config_.d_model}), *stream_);
  return out;
}

TensorView Transformer::attention_probs(Attention kind, int64_t layer) const {
  TFM_REQUIRE(B_ > 0, "no model pass has run: there are no attention weights yet");
  const int64_t layers = kind == Attention::encoder ? config_.encoder_layers : config_.decoder_layers;
  TFM_REQUIRE(layer >= 0 && layer < layers, "layer {} is outside the {} layers of the model's {}", layer, layers,
              kind == Attention::encoder ? "encoder" : "decoder");
  const auto l = static_cast<size_t>(layer);
  const int id = kind == Attention::encoder   ? plan_->enc[l].attn.probs
                 : kind == Attention::decoder ? plan_->dec[l].self_attn.probs
                                              : plan_->dec[l].cross_attn.probs;
  const int64_t tq = kind == Attention::encoder ? Sa_ : Ta_, tk = kind == Attention::decoder ? Ta_ : Sa_;
  return prefix(memory_->view(id), {B_, config_.heads, tq, tk});
}

Tensor Transformer::log_probs(const HostBatch& batch) {
  TrainStep step;
  step.dropout = false;
  upload(batch);
  forward(step);
  Pass pass(*this, step);
  const TensorView y = pass.decoder_output();  // packed rows
  const int64_t V = config_.vocab_size, chunk = memory_->view(plan_->logits).dim(0);
  // Host row of packed row r: sentence i's rows go to i * T + t.
  std::vector<int64_t> dest;
  dest.reserve(static_cast<size_t>(Nt_));
  for (int64_t i = 0; i < B_; ++i)
    for (int64_t t = 0; t < batch.tgt_lengths[static_cast<size_t>(i)]; ++t) dest.push_back(i * T_ + t);
  Tensor out = Tensor::zeros({B_ * T_, V}, param_dtype_);
  Tensor staging({std::min(chunk, Nt_), V}, param_dtype_);
  const size_t row_bytes = static_cast<size_t>(V) * dtype_size(param_dtype_);
  for (int64_t r0 = 0; r0 < Nt_; r0 += chunk) {
    const int64_t n = std::min(chunk, Nt_ - r0);
    const TensorView logits = prefix(memory_->view(plan_->logits), {n, V});
    pass.logits(rows(y, r0, n), logits);
    ops::log_softmax(logits, logits, *stream_);
    copy(rows(staging.view(), 0, n), logits, *stream_);
    auto* to = static_cast<char*>(out.view().data());
    const auto* from = static_cast<const char*>(staging.view().data());
    for (int64_t r = 0; r < n; ++r)
      std::memcpy(to + static_cast<size_t>(dest[static_cast<size_t>(r0 + r)]) * row_bytes,
                  from + static_cast<size_t>(r) * row_bytes, row_bytes);
  }
  return out;
}

}  // namespace tfm
