// The model's building blocks, forward and backward, written out over the
// op layer: linear layers, multi-head attention and the sub-layer ends
// (post-norm or pre-norm). Internal to libcore/model.
#pragma once

#include "kernels/ops.h"
#include "libcore/model/config.h"
#include "libcore/model/params.h"

namespace tfm::model {

class Int8Weights;
class PackedWeights;

// Everything a block needs to run: the stream, the parameter and gradient
// buffers, and the workspace it may overwrite.
struct Workspace {
  TensorView proj;    // (R, 2 HK + HE): q, k, v side by side
  TensorView scores;  // (R * H * L) dropped attention weights
  TensorView split;   // (R * max(HK, HE)) heads before the merge / their grads
  TensorView dq, dk, dv;  // (R * HK), (R * HK), (R * HE)
  TensorView dprobs;  // (R * H * L)
  TensorView dproj;   // (R, 2 HK + HE)
};

struct Blocks {
  const Stream& stream;
  const ModelConfig& config;
  const ParamLayout& layout;
  TensorView params, grads;
  Workspace ws;
  bool tf32 = false;  // f32 GEMMs may use TF32 tensor cores (CUDA; --precision tf32)
  bool row_invariant = false;  // the decoder's GEMMs: each row alone (ops.h, gemm)
  const Int8Weights* int8 = nullptr;  // x W^T in int8 (inference on the CPU; int8.h)
  const PackedWeights* packed = nullptr;  // the weights as the row-invariant GEMM's panels (packed.h)

  TensorView p(int id) const { return layout.view(params, id); }
  TensorView g(int id) const { return layout.view(grads, id); }
  // The options every GEMM of the blocks starts from.
  ops::GemmOptions gemm() const {
    ops::GemmOptions o;
    o.tf32 = tf32;
    o.row_invariant = row_invariant;
    return o;
  }
};

// The first `shape.numel()` elements of a planned buffer, seen as `shape`.
TensorView prefix(const TensorView& buffer, Shape shape);
// Rows [r0, r0 + n) of a (R, C) tensor.
TensorView rows(const TensorView& t, int64_t r0, int64_t n);

// A linear layer's weight and bias, and their gradients: one layer's, or
// (joined) the stacked q, k, v projections of attention (ParamLayout::attention).
struct Linear {
  TensorView w, b, dw, db;  // (out, in), (out)
};
Linear linear(const Blocks& m, LinearIds w);
Linear joined(const Blocks& m, LinearIds first, LinearIds last);

// y = x W^T + b (then ReLU)                       x (R, in), y (R, out) =
void linear_forward(const Blocks& m, const TensorView& x, const Linear& w, const TensorView& y,
                    bool relu = false);
// logits = y E^T (+ b): the output projection, E (V, D) the target
// embedding or its own weights (tie_output), b the logits' bias when the
// model has one; as the layers' weights are (in int8 with Blocks::int8).
//                                                      y (R, D), logits (R, V) =
void output_projection(const Blocks& m, const TensorView& y, const TensorView& E, const TensorView& logits,
                       const TensorView& bias = {});
// dW += dy^T x, db += sum_R dy; dx = dy W (+= when dx_beta is 1; no dx when empty)
void linear_backward(const Blocks& m, const TensorView& x, const Linear& w, const TensorView& dy,
                     const TensorView& dx, float dx_beta);
inline void linear_forward(const Blocks& m, const TensorView& x, LinearIds w, const TensorView& y,
                           bool relu = false) {
  linear_forward(m, x, linear(m, w), y, relu);
}
inline void linear_backward(const Blocks& m, const TensorView& x, LinearIds w, const TensorView& dy,
                            const TensorView& dx, float dx_beta) {
  linear_backward(m, x, linear(m, w), dy, dx, dx_beta);
}

// ------------------------------------------------------------ sub-layers
// One home for a block's forward pieces: training and scoring (Pass,
// transformer.cc) and decoding (IncrementalDecoder) call these with their
// own buffers, so the architecture is written once. The backward pieces
// live with the training pass, their only caller.

// A layer norm's parameters (f32, the master copy) and epsilon.
struct Norm {
  TensorView gamma, beta;  // (D)
  float eps;
};
// What a layer norm writes beside its output: the normalized rows' input
// (post-norm: the residual sum the norm reads), and the row statistics.
struct NormBuffers {
  TensorView h;           // (R, D)
  TensorView mean, rstd;  // (R)
};

// The input of a sub-layer: x itself (post-norm) or LayerNorm(x) in b.h
// (pre-norm), returned.                                        x (R, D)
TensorView sublayer_input(const Blocks& m, const Norm& n, const TensorView& x, const NormBuffers& b);
// The block's output from its residual input x and the sub-layer's output s:
// y = LayerNorm(x + dropout(s)) (post-norm) or x + dropout(s) (pre-norm);
// dropout p with key (p = 0 when decoding).              x, s, y (R, D) =
void sublayer_end(const Blocks& m, const Norm& n, const TensorView& x, const TensorView& s, float p,
                  const RngKey& key, const NormBuffers& b, const TensorView& y);
// A pre-norm stack's last layer norm: y = LayerNorm(x).          x, y (R, D) =
void final_norm(const Blocks& m, const Norm& n, const TensorView& x, const NormBuffers& b, const TensorView& y);
// The feed-forward sub-layer: s = act(in W1^T + b1) W2^T + b2, through f
// (act(...)). For an activation other than ReLU, `pre` (when given) keeps
// in W1^T + b1 for backward; otherwise f holds it first.
//                                   in (R, D), f, pre (R, d_ff), s (R, D) =
void ffn_forward(const Blocks& m, FfnIds w, const TensorView& in, const TensorView& f, const TensorView& s,
                 const TensorView& pre = {});

// What multi-head attention saves for backward.
struct AttentionSaved {
  TensorView q, k, v;  // (B, H, Tq, K), (B, H, Tk, K), (B, H, Tk, E); Tq, Tk the tiles'
  TensorView probs;    // (B, H, Tq, Tk), before attention dropout
  TensorView ctx;      // (Nq, H * E), the merged heads as packed rows
};

// Queries and keys come as packed token rows (Nq and Nk of them; sentence b
// owns rows [offsets[b], offsets[b + 1])), padded to the batch's longest
// query and key lengths tq and tk inside, and the heads further to tiles of
// tile_q x tile_k (>= tq, tk: equal on the CPU; multiples of 8 on CUDA where
// the plan has room, so the GEMMs get aligned rows). Attention dropout is
// keyed by the unpadded (tq, tk) index: padding never changes what is dropped.
struct AttentionShape {
  int64_t batch, tq, tk;
  int64_t tile_q, tile_k;
  int64_t nq, nk;
  TensorView q_offsets, k_offsets;  // (B + 1) i32
  TensorView k_lengths;             // (B) i32
  bool causal;
  float dropout;  // on the attention weights
  RngKey key;
};

// s = MultiHead(xq, xkv) = Concat(head_1..head_H) W_O^T + b_O,
// head_i = softmax(mask(q_i k_i^T / sqrt(K))) v_i.   xq (Nq, D), xkv (Nk, D), s (Nq, D) =
// When xq is xkv (self-attention) one GEMM projects q, k and v; otherwise
// one projects q and one k and v.
void attention_forward(const Blocks& m, AttentionIds w, const AttentionShape& a,
                       const TensorView& xq, const TensorView& xkv, const AttentionSaved& saved,
                       const TensorView& s);
// dxq (+= or = per dxq_beta), dxkv += (dxkv may be dxq: self-attention)
void attention_backward(const Blocks& m, AttentionIds w, const AttentionShape& a,
                        const TensorView& xq, const TensorView& xkv, const AttentionSaved& saved,
                        const TensorView& ds, const TensorView& dxq, float dxq_beta,
                        const TensorView& dxkv);

}  // namespace tfm::model
