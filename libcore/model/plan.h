// Internal to libcore/model: the model's memory plan (Transformer::Plan),
// the named buffers every pass reads and writes, and their ids by layer.
// transformer.cc runs the passes over it; plan.cc sizes it.
#pragma once

#include <cstdint>
#include <vector>

#include "libcore/base/memory.h"
#include "libcore/model/transformer.h"

namespace tfm {

namespace model {

// What one sub-layer end saves. Post-norm: h = residual + dropout(s) and
// y = LayerNorm(h) (the block output). Pre-norm: h = LayerNorm(x) (the
// sub-layer's input) and y = x + dropout(s) (the block output).
struct SublayerIds { int h, y, mean, rstd; };
struct AttentionPlanIds { int q, k, v, probs, ctx; };
// f: the feed-forward's hidden rows: ReLU's output, or another
// activation's input (its output is recomputed: Plan::activated).
struct EncoderLayerPlan { AttentionPlanIds attn; SublayerIds a; int f; SublayerIds b; };
struct DecoderLayerPlan {
  AttentionPlanIds self_attn; SublayerIds a;
  AttentionPlanIds cross_attn; SublayerIds b;
  int f; SublayerIds c;
};

}  // namespace model

// The named activation table: every buffer the model
// uses, sized from (config, limits), in one MemoryPlan.
struct Transformer::Plan {
  MemoryPlan mem;
  // The parameters and their compute copy are the model's weights'
  // (ModelWeights); gradients and Adam's moments have their layout.
  int grads, adam_m, adam_v;
  int src, src_lengths, src_offsets, tgt_in, tgt_out, tgt_lengths, tgt_offsets;
  int enc_in, dec_in;
  std::vector<model::EncoderLayerPlan> enc;
  std::vector<model::DecoderLayerPlan> dec;
  model::SublayerIds enc_final{-1, -1, -1, -1}, dec_final{-1, -1, -1, -1};
  // workspace
  int padded, proj, scores, split, dq, dk, dv, dprobs, dproj, s, ds, df, dln, g_dec, g_enc, logits, logits16, sums;
  int activated = -1;  // act(pre-activation) of one feed-forward, for activations other than ReLU
  // Room for attention tiles: rows of a (B, H, rows, X) head buffer, and
  // elements of one head's (Tq, Tk) weights (TileRoom: R and R x L, more on CUDA).
  int64_t head_rows = 0, map_elems = 0;
  // {loss, nll, sum of squared gradients} of the update in progress: summed
  // on the device over its batches, sent to the host once (send_update);
  // and the decision ops::update_control makes from them.
  int update = -1, control = -1;

  // dt: compute dtype; pt: parameters, gradients, logits and loss.
  // tiles: the room of the attention buffers, at least the batch's own
  // lengths need (R rows of heads, R x L elements of a head's maps); more on
  // CUDA, for tiles padded past the batch's lengths (Transformer::attention_tiles).
  struct TileRoom {
    int64_t head_rows, map_elems;
  };
  Plan(const ModelConfig& c, const ModelLimits& lim, DType dt, DType pt, int64_t param_elems,
       TileRoom tiles);
};

}  // namespace tfm
