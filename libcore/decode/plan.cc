#include "libcore/decode/plan.h"

#include <algorithm>
#include <string>

#include "kernels/ops.h"
#include "libcore/base/error.h"

namespace tfm {

IncrementalDecoder::Plan::Plan(const ModelConfig& c, DecoderLimits& l, DType dt, DType pt) {
  TFM_REQUIRE(l.sentences >= 1 && l.src_tokens >= 1 && l.src_len >= 1 && l.rows >= 1 &&
                  l.steps >= 1 && l.top_k >= 1 && l.cache_rows >= 0,
              "decoder limits must be positive (sentences {}, source tokens {}, source length "
              "{}, rows {}, steps {}, top k {})",
              l.sentences, l.src_tokens, l.src_len, l.rows, l.steps, l.top_k);
  TFM_REQUIRE(l.attention_layer >= -1 && l.attention_layer < c.decoder_layers,
              "attention layer {} is outside the model's {} decoder layers", l.attention_layer,
              c.decoder_layers);
  TFM_REQUIRE(!c.learned_positions || std::max(l.steps, l.src_len) <= c.max_positions,
              "decoding {} positions of sources up to {} tokens needs more than the {} learned "
              "positions the model has",
              l.steps, l.src_len, c.max_positions);
  l.src_tokens = std::max(l.src_tokens, l.src_len);
  l.top_k = std::min(l.top_k, c.vocab_size);
  const int64_t H = c.heads, HK = c.heads * c.d_k, HE = c.heads * c.d_v, D = c.d_model;
  const int64_t rows = l.rows, src = l.src_tokens;
  const int64_t act_rows = std::max(rows, src);
  if (l.cache_rows == 0) l.cache_rows = l.steps * rows;

  const DType st = ops::stats_dtype(pt);
  IncrementalDecoder::Plan& i = *this;
  auto io = [&](const char* n, int64_t count) {
    return mem.add(MemoryKind::io, n, DType::i32, {count});
  };
  auto act = [&](const char* n, DType t, Shape s) {
    return mem.add(MemoryKind::activations, n, t, s);
  };
  auto pool = [&](const std::string& n, int64_t r, int64_t cols) {
    return mem.add(MemoryKind::kv_cache, n, dt, {r, cols});
  };
  i.src = io("source", src);
  i.enc_groups = io("source.groups", src);
  i.enc_index = io("source.index", l.sentences * l.src_len);
  i.enc_lengths = io("source.lengths", l.sentences);
  i.cross_slots = io("source.slots", src);
  i.cross_index = io("cross.index", l.sentences * l.src_len);
  i.cross_lengths = io("cross.lengths", l.sentences);
  i.step_rows = io("step.rows", kStepTables * l.rows);
  i.history[0] = io("self.lists.0", l.rows * l.steps);
  i.history[1] = io("self.lists.1", l.rows * l.steps);
  i.self_lengths = io("self.lengths", l.rows);
  i.self_groups = io("self.groups", l.rows);
  const int64_t stat_words = static_cast<int64_t>(dtype_size(st) / sizeof(int32_t));
  i.top = io("top", l.rows * l.top_k * (stat_words + 1));
  for (int64_t layer = 0; layer < c.decoder_layers; ++layer) {
    i.pool_k.push_back(pool(fmt::format("self.{}.k", layer), l.cache_rows, HK));
    i.pool_v.push_back(pool(fmt::format("self.{}.v", layer), l.cache_rows, HE));
    i.cross_k.push_back(pool(fmt::format("cross.{}.k", layer), src, HK));
    i.cross_v.push_back(pool(fmt::format("cross.{}.v", layer), src, HE));
  }
  i.x = act("x", dt, {act_rows, D});
  i.y_a = act("y_a", dt, {act_rows, D});
  i.y_b = act("y_b", dt, {act_rows, D});
  i.h = act("h", dt, {act_rows, D});
  i.s = act("s", dt, {act_rows, D});
  i.qkv = act("qkv", dt, {act_rows, 2 * HK + HE});
  i.q = act("q", dt, {act_rows, HK});
  i.k = act("k", dt, {src, HK});
  i.v = act("v", dt, {src, HE});
  i.ctx = act("ctx", dt, {act_rows, HE});
  i.f = act("f", dt, {act_rows, c.d_ff});
  i.mean = act("mean", st, {act_rows});
  i.rstd = act("rstd", st, {act_rows});
  i.logits = act("logits", pt, {rows, c.vocab_size});
  i.lse = act("lse", st, {l.rows});
  i.column = act("column", pt, {l.rows});
  if (l.attention_layer >= 0) i.probs = act("attention", st, {l.rows * H * l.src_len});
  const int64_t U = l.shortlist_columns, Ks = l.shortlist_sentence_columns;
  if (U > 0) {
    TFM_REQUIRE(U <= c.vocab_size && Ks >= 1 && Ks <= U, "internal: shortlist columns {} and {} for {} ids", U, Ks,
                c.vocab_size);
    i.sl_ids = io("shortlist.ids", U);
    i.sl_columns = io("shortlist.columns", l.sentences * Ks);
    i.sl_weights = act("shortlist.weights", dt, {U, D});
    i.sl_bias = act("shortlist.bias", pt, {U});
    i.sl_row = act("shortlist.row", pt, {Ks});
  }
  // encode()'s sources, groups and pool rows (src each), its index and
  // lengths and the cross-attention's, or a step's rows; or the shortlist's
  // union (U).
  staging_bytes = static_cast<size_t>(std::max({3 * src + 2 * l.sentences * (l.src_len + 1), kStepTables * l.rows, U})) *
                  sizeof(int32_t);
}

}  // namespace tfm
