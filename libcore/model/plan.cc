#include "libcore/model/plan.h"

#include <algorithm>
#include <string>

#include "kernels/ops.h"

namespace tfm {

using model::AttentionPlanIds;
using model::DecoderLayerPlan;
using model::EncoderLayerPlan;
using model::SublayerIds;

Transformer::Plan::Plan(const ModelConfig& c, const ModelLimits& lim, DType dt, DType pt, int64_t param_elems,
                        TileRoom tiles) {
  const int64_t R = lim.max_tokens, D = c.d_model, F = c.d_ff, H = c.heads;
  const int64_t HK = H * c.d_k, HE = H * c.d_v, HX = std::max(HK, HE), Rh = tiles.head_rows;
  const int64_t M = tiles.map_elems;  // (Tq, Tk) map elements of all sentences, one head
  head_rows = Rh;
  map_elems = M;
  const DType st = ops::stats_dtype(pt);
  auto act = [&](const std::string& n, DType t, Shape s) { return mem.add(MemoryKind::activations, n, t, s); };
  auto ws = [&](const std::string& n, DType t, Shape s) { return mem.add(MemoryKind::workspace, n, t, s); };
  auto sub = [&](const std::string& n) {
    return SublayerIds{act(n + ".h", dt, {R, D}), act(n + ".y", dt, {R, D}),
                       act(n + ".mean", st, {R}), act(n + ".rstd", st, {R})};
  };
  auto attn = [&](const std::string& n) {
    return AttentionPlanIds{act(n + ".q", dt, {Rh * HK}), act(n + ".k", dt, {Rh * HK}),
                            act(n + ".v", dt, {Rh * HE}), act(n + ".probs", dt, {H * M}),
                            act(n + ".ctx", dt, {R, HE})};
  };
  grads = mem.add(MemoryKind::gradients, "grads", pt, {param_elems});
  adam_m = mem.add(MemoryKind::optimizer, "adam.m", pt, {param_elems});
  adam_v = mem.add(MemoryKind::optimizer, "adam.v", pt, {param_elems});
  src = mem.add(MemoryKind::io, "src", DType::i32, {R});
  src_lengths = mem.add(MemoryKind::io, "src_lengths", DType::i32, {R});
  src_offsets = mem.add(MemoryKind::io, "src_offsets", DType::i32, {R + 1});
  tgt_in = mem.add(MemoryKind::io, "tgt_in", DType::i32, {R});
  tgt_out = mem.add(MemoryKind::io, "tgt_out", DType::i32, {R});
  tgt_lengths = mem.add(MemoryKind::io, "tgt_lengths", DType::i32, {R});
  tgt_offsets = mem.add(MemoryKind::io, "tgt_offsets", DType::i32, {R + 1});
  enc_in = act("encoder.input", dt, {R, D});
  dec_in = act("decoder.input", dt, {R, D});
  for (int64_t l = 0; l < c.encoder_layers; ++l) {
    const std::string p = fmt::format("encoder.{}", l);
    enc.push_back({attn(p + ".self_attn"), sub(p + ".a"), act(p + ".ffn", dt, {R, F}), sub(p + ".b")});
  }
  for (int64_t l = 0; l < c.decoder_layers; ++l) {
    const std::string p = fmt::format("decoder.{}", l);
    dec.push_back({attn(p + ".self_attn"), sub(p + ".a"), attn(p + ".cross_attn"), sub(p + ".b"),
                   act(p + ".ffn", dt, {R, F}), sub(p + ".c")});
  }
  if (c.pre_norm) {
    enc_final = sub("encoder.final");
    dec_final = sub("decoder.final");
  }
  padded = ws("padded", dt, {R, D});
  proj = ws("proj", dt, {R * (2 * HK + HE)});
  scores = ws("scores", dt, {H * M});
  split = ws("split", dt, {Rh * HX});
  dq = ws("dq", dt, {Rh * HK});
  dk = ws("dk", dt, {Rh * HK});
  dv = ws("dv", dt, {Rh * HE});
  dprobs = ws("dprobs", dt, {H * M});
  dproj = ws("dproj", dt, {R * (2 * HK + HE)});
  s = ws("s", dt, {R, D});
  ds = ws("ds", dt, {R, D});
  df = ws("df", dt, {R, F});
  // A block saves the feed-forward's pre-activation; what fc2 reads is
  // recomputed here (ReLU needs neither: its output is its own mask).
  if (c.activation != ops::Activation::relu) activated = ws("ffn.activated", dt, {R, F});
  dln = ws("dln", dt, {R, D});
  g_dec = ws("g_dec", dt, {R, D});
  g_enc = ws("g_enc", dt, {R, D});
  const int64_t chunk = std::min(lim.loss_chunk, R);
  logits = ws("logits", pt, {chunk, c.vocab_size});
  logits16 = dt != pt ? ws("logits.compute", dt, {chunk, c.vocab_size}) : logits;
  sums = ws("sums", st, {2});
  update = mem.add(MemoryKind::io, "update", st, {3});
  control = mem.add(MemoryKind::io, "update.control", st, {ops::kUpdateControlSize});
}

}  // namespace tfm
