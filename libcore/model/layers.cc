#include "libcore/model/layers.h"

#include <cmath>

#include "libcore/model/int8.h"
#include "libcore/model/packed.h"

namespace tfm::model {

TensorView prefix(const TensorView& buffer, Shape shape) {
  TFM_REQUIRE(shape.numel() <= buffer.numel(), "internal: {} does not fit a planned buffer of {}",
              shape.str(), buffer.numel());
  return TensorView(buffer.data(), buffer.dtype(), shape, buffer.device());
}

TensorView rows(const TensorView& t, int64_t r0, int64_t n) {
  const int64_t cols = t.dim(-1);
  auto* base = static_cast<char*>(t.data()) + r0 * cols * static_cast<int64_t>(dtype_size(t.dtype()));
  return TensorView(base, t.dtype(), {n, cols}, t.device());
}

Linear linear(const Blocks& m, LinearIds w) {
  return {m.p(w.weight), m.p(w.bias), m.grads.empty() ? TensorView() : m.g(w.weight),
          m.grads.empty() ? TensorView() : m.g(w.bias)};
}

Linear joined(const Blocks& m, LinearIds first, LinearIds last) {
  const ParamLayout& l = m.layout;
  return {l.view(m.params, first.weight, last.weight), l.view(m.params, first.bias, last.bias),
          m.grads.empty() ? TensorView() : l.view(m.grads, first.weight, last.weight),
          m.grads.empty() ? TensorView() : l.view(m.grads, first.bias, last.bias)};
}

void linear_forward(const Blocks& m, const TensorView& x, const Linear& w, const TensorView& y,
                    bool relu) {
  if (m.int8) {
    ops::gemm_int8(x, m.int8->find(w.w), y, m.stream, w.b, relu);
    return;
  }
  ops::GemmOptions o = m.gemm();
  o.trans_b = true;
  o.relu = relu;
  if (m.packed) o.packed_b = m.packed->find(w.w);
  ops::gemm(x, w.w, y, o, m.stream, w.b);
}

TensorView sublayer_input(const Blocks& m, const Norm& n, const TensorView& x, const NormBuffers& b) {
  if (!m.config.pre_norm) return x;
  ops::layernorm_forward(x, n.gamma, n.beta, n.eps, b.h, b.mean, b.rstd, m.stream);
  return b.h;
}

void sublayer_end(const Blocks& m, const Norm& n, const TensorView& x, const TensorView& s, float p,
                  const RngKey& key, const NormBuffers& b, const TensorView& y) {
  if (m.config.pre_norm)
    ops::add_dropout_forward(x, s, p, key, y, m.stream);
  else
    ops::add_dropout_layernorm_forward(x, s, p, key, n.gamma, n.beta, n.eps, b.h, y, b.mean, b.rstd, m.stream);
}

void final_norm(const Blocks& m, const Norm& n, const TensorView& x, const NormBuffers& b, const TensorView& y) {
  ops::layernorm_forward(x, n.gamma, n.beta, n.eps, y, b.mean, b.rstd, m.stream);
}

void ffn_forward(const Blocks& m, FfnIds w, const TensorView& in, const TensorView& f, const TensorView& s,
                 const TensorView& pre) {
  const ops::Activation act = m.config.activation;
  if (act == ops::Activation::relu) {
    linear_forward(m, in, w.fc1, f, /*relu=*/true);  // fused into the GEMM
  } else {
    const TensorView u = pre.empty() ? f : pre;
    linear_forward(m, in, w.fc1, u);
    ops::activation_forward(u, act, f, m.stream);
  }
  linear_forward(m, f, w.fc2, s);
}

void output_projection(const Blocks& m, const TensorView& y, const TensorView& E, const TensorView& logits,
                       const TensorView& bias) {
  if (m.int8) {
    ops::gemm_int8(y, m.int8->find(E), logits, m.stream, bias);
    return;
  }
  ops::GemmOptions o = m.gemm();
  o.trans_b = true;
  if (m.packed) o.packed_b = m.packed->find(E);
  ops::gemm(y, E, logits, o, m.stream, bias);
}

void linear_backward(const Blocks& m, const TensorView& x, const Linear& w, const TensorView& dy,
                     const TensorView& dx, float dx_beta) {
  ops::GemmOptions dw = m.gemm();
  dw.trans_a = true;
  dw.beta = 1.0f;
  ops::gemm(dy, x, w.dw, dw, m.stream);
  ops::sum_rows(dy, w.db, m.stream);
  if (dx.empty()) return;
  ops::GemmOptions dxo = m.gemm();
  dxo.beta = dx_beta;
  ops::gemm(dy, w.w, dx, dxo, m.stream);
}

namespace {

// Packed rows, columns [col, col + H X) <-> padded (B, H, T, X) heads (zeros
// at the padding).
void split_heads(const Blocks& m, const TensorView& rows_view, const TensorView& offsets,
                 const TensorView& heads, int64_t col = 0) {
  ops::unpack_heads(rows_view, offsets, heads, m.stream, col);
}
void merge_heads(const Blocks& m, const TensorView& heads, const TensorView& offsets,
                 const TensorView& rows_view, int64_t col = 0) {
  ops::pack_heads(heads, offsets, rows_view, m.stream, col);
}

// The attention weights after dropout: probs itself, or the dropped copy
// in the workspace (recomputed from the key in backward, never stored).
TensorView dropped_weights(const Blocks& m, const AttentionShape& a, const TensorView& probs) {
  if (a.dropout <= 0) return probs;
  const TensorView w = prefix(m.ws.scores, probs.shape());
  ops::attention_dropout(probs, a.tq, a.tk, a.dropout, a.key, w, m.stream);
  return w;
}

}  // namespace

void attention_forward(const Blocks& m, AttentionIds w, const AttentionShape& a,
                       const TensorView& xq, const TensorView& xkv, const AttentionSaved& sv,
                       const TensorView& s) {
  const ModelConfig& c = m.config;
  const int64_t B = a.batch, H = c.heads, K = c.d_k, E = c.d_v, BH = B * H;
  if (xq.data() == xkv.data()) {  // self-attention: [q k v] = x [W_q; W_k; W_v]^T
    const TensorView proj = prefix(m.ws.proj, {a.nq, 2 * H * K + H * E});
    linear_forward(m, xq, joined(m, w.q, w.v), proj);
    split_heads(m, proj, a.q_offsets, sv.q, 0);
    split_heads(m, proj, a.k_offsets, sv.k, H * K);
    split_heads(m, proj, a.k_offsets, sv.v, 2 * H * K);
  } else {
    TensorView proj = prefix(m.ws.proj, {a.nq, H * K});
    linear_forward(m, xq, w.q, proj);
    split_heads(m, proj, a.q_offsets, sv.q);
    proj = prefix(m.ws.proj, {a.nk, H * K + H * E});
    linear_forward(m, xkv, joined(m, w.k, w.v), proj);
    split_heads(m, proj, a.k_offsets, sv.k, 0);
    split_heads(m, proj, a.k_offsets, sv.v, H * K);
  }

  ops::GemmOptions qk = m.gemm();
  qk.trans_b = true;
  qk.alpha = static_cast<float>(1.0 / std::sqrt(static_cast<double>(K)));
  const int64_t Tq = a.tile_q, Tk = a.tile_k;
  const TensorView scores = sv.probs.reshape({BH, Tq, Tk});
  ops::gemm(sv.q.reshape({BH, Tq, K}), sv.k.reshape({BH, Tk, K}), scores, qk, m.stream);
  ops::masked_softmax_forward(sv.probs, a.k_lengths, a.causal, sv.probs, m.stream);
  const TensorView weights = dropped_weights(m, a, sv.probs);
  const TensorView heads = prefix(m.ws.split, {B, H, Tq, E});
  ops::gemm(weights.reshape({BH, Tq, Tk}), sv.v.reshape({BH, Tk, E}), heads.reshape({BH, Tq, E}),
            {}, m.stream);
  merge_heads(m, heads, a.q_offsets, sv.ctx);
  linear_forward(m, sv.ctx, w.out, s);
}

void attention_backward(const Blocks& m, AttentionIds w, const AttentionShape& a,
                        const TensorView& xq, const TensorView& xkv, const AttentionSaved& sv,
                        const TensorView& ds, const TensorView& dxq, float dxq_beta,
                        const TensorView& dxkv) {
  const ModelConfig& c = m.config;
  const int64_t B = a.batch, H = c.heads, K = c.d_k, E = c.d_v, BH = B * H;
  // Output projection, then the merge in reverse.
  const TensorView dctx = prefix(m.ws.dproj, {a.nq, H * E});
  linear_backward(m, sv.ctx, w.out, ds, dctx, 0.0f);
  const int64_t Tq = a.tile_q, Tk = a.tile_k;
  const TensorView dheads = prefix(m.ws.split, {B, H, Tq, E});
  split_heads(m, dctx, a.q_offsets, dheads);

  const TensorView weights = dropped_weights(m, a, sv.probs);  // the same mask again
  // dV = W^T dO;  dW = dO V^T
  ops::GemmOptions ta = m.gemm();
  ta.trans_a = true;
  const TensorView dv = prefix(m.ws.dv, {BH, Tk, E});
  ops::gemm(weights.reshape({BH, Tq, Tk}), dheads.reshape({BH, Tq, E}), dv, ta, m.stream);
  ops::GemmOptions tb = m.gemm();
  tb.trans_b = true;
  const TensorView dprobs = prefix(m.ws.dprobs, {B, H, Tq, Tk});
  ops::gemm(dheads.reshape({BH, Tq, E}), sv.v.reshape({BH, Tk, E}), dprobs.reshape({BH, Tq, Tk}),
            tb, m.stream);
  if (a.dropout > 0)
    ops::attention_dropout(dprobs, a.tq, a.tk, a.dropout, a.key, dprobs, m.stream);
  ops::masked_softmax_backward(sv.probs, dprobs, dprobs, m.stream);

  // scores = scale q k^T:  dq = scale dS k;  dk = scale dS^T q
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(K)));
  ops::GemmOptions dqo = m.gemm();
  dqo.alpha = scale;
  const TensorView dq = prefix(m.ws.dq, {BH, Tq, K});
  ops::gemm(dprobs.reshape({BH, Tq, Tk}), sv.k.reshape({BH, Tk, K}), dq, dqo, m.stream);
  ops::GemmOptions dko = m.gemm();
  dko.alpha = scale;
  dko.trans_a = true;
  const TensorView dk = prefix(m.ws.dk, {BH, Tk, K});
  ops::gemm(dprobs.reshape({BH, Tq, Tk}), sv.q.reshape({BH, Tq, K}), dk, dko, m.stream);

  // Back through the head splits and the input projections: in
  // self-attention one GEMM sums the three paths into dx.
  if (xq.data() == xkv.data() && dxq.data() == dxkv.data()) {
    const TensorView dproj = prefix(m.ws.dproj, {a.nq, 2 * H * K + H * E});
    merge_heads(m, dq.reshape({B, H, Tq, K}), a.q_offsets, dproj, 0);
    merge_heads(m, dk.reshape({B, H, Tk, K}), a.k_offsets, dproj, H * K);
    merge_heads(m, dv.reshape({B, H, Tk, E}), a.k_offsets, dproj, 2 * H * K);
    linear_backward(m, xq, joined(m, w.q, w.v), dproj, dxq, dxq_beta);
    return;
  }
  TensorView dproj = prefix(m.ws.dproj, {a.nq, H * K});
  merge_heads(m, dq.reshape({B, H, Tq, K}), a.q_offsets, dproj);
  linear_backward(m, xq, w.q, dproj, dxq, dxq_beta);
  dproj = prefix(m.ws.dproj, {a.nk, H * K + H * E});
  merge_heads(m, dk.reshape({B, H, Tk, K}), a.k_offsets, dproj, 0);
  merge_heads(m, dv.reshape({B, H, Tk, E}), a.k_offsets, dproj, H * K);
  linear_backward(m, xkv, joined(m, w.k, w.v), dproj, dxkv, 1.0f);
}

}  // namespace tfm::model
