// Internal to libcore/decode: the incremental decoder's memory plan
// (IncrementalDecoder::Plan), as libcore/model/plan.h is the Transformer's:
// every buffer a batch's decoding reads and writes, sized from the
// model's configuration and the decoder's limits, by name in one
// MemoryPlan. incremental.cc decodes over it; plan.cc sizes it.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/ops.h"
#include "libcore/base/memory.h"
#include "libcore/decode/incremental.h"
#include "libcore/model/layers.h"

namespace tfm {

// A step's upload: tokens, sentences, parents, positions, slots.
inline constexpr int64_t kStepTables = 5;

struct IncrementalDecoder::Plan {
  // `limits` checked against the model and completed (DecoderLimits: source
  // tokens at least a source, top k at most the vocabulary, pool rows).
  Plan(const ModelConfig& c, DecoderLimits& limits, DType dt, DType pt);

  MemoryPlan mem;
  size_t staging_bytes = 0;  // the largest upload (HostStaging)

  // io: an admission's sources and the encoder's index tables, the pool
  // rows of its sources' keys and values (cross_slots); the cross-attention
  // tables of every slot; the step's rows, uploaded together as [tokens |
  // sentences | parents | positions | slots] (N each: the pool rows of the
  // step's keys and values last); the self-attention lists, (rows, steps)
  // twice (a step reads one and writes the other); the top k, downloaded
  // together as [values (N, k) | ids (N, k)]. Every table of a step is
  // planned at the limits' size, so a step's graph (StreamGraph) holds for
  // every step.
  int src, enc_groups, enc_index, enc_lengths, cross_slots, cross_index, cross_lengths;
  int step_rows, history[2], self_lengths, self_groups, top;
  // kv-cache, per decoder layer
  std::vector<int> pool_k, pool_v, cross_k, cross_v;
  // activations, shared by the encoder (source tokens) and the decoder (rows)
  int x, y_a, y_b, h, s, qkv, q, k, v, ctx, f, mean, rstd;
  // the output layer and what the host reads
  int logits, lse, column, probs = -1;
  // Under a shortlist (DecoderLimits::shortlist_columns U > 0): the
  // union's vocabulary ids (U) and each slot's columns into it
  // (sentences, shortlist_sentence_columns), io; the union's rows of the
  // output projection (U, D) and of its bias (U), and one row's logits
  // over its sentence's candidates, activations.
  int sl_ids = -1, sl_columns = -1, sl_weights = -1, sl_bias = -1, sl_row = -1;
};


// incremental.cc's and incremental_shortlist.cc's small helpers.
namespace decode_detail {

// Part of an upload (HostStaging): values into the front of buffer.
inline HostStaging::Part part(const TensorView& buffer, const std::vector<int32_t>& values) {
  return {model::prefix(buffer, {static_cast<int64_t>(values.size())}), values};
}

// n i32 values at element `at` of an i32 buffer.
inline TensorView slice(const TensorView& buffer, int64_t at, int64_t n) {
  return TensorView(buffer.data_as<int32_t>() + at, DType::i32, {n}, buffer.device());
}

inline std::vector<double> download(const TensorView& t, const Stream& st) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::f64) {
    copy(TensorView(out.data(), DType::f64, t.shape()), t, st);
  } else {
    std::vector<float> f(out.size());
    copy(TensorView(f.data(), DType::f32, t.shape()), t, st);
    std::copy(f.begin(), f.end(), out.begin());
  }
  return out;
}

}  // namespace decode_detail

// The union of the admitted sentences' candidates (a shortlist), and what
// the step's GEMM reads of it beside the planned buffers (plan.h, sl_*):
// on the CPU, the union's rows of the output projection as the GEMM's
// panels (f32 with packed weights), or in int8 (the union's quantized rows,
// copied from the model's, and their panels). Host memory sized for the
// most columns (DecoderLimits::shortlist_columns) at construction.
struct IncrementalDecoder::Union {
  std::vector<int32_t> ids;     // vocabulary ids: column j of a step's logits is ids[j]
  std::vector<int32_t> column;  // (V): each id's column, -1 when not in the union
  std::vector<int32_t> users;   // (V): the sentences admitted whose candidates hold each id
  int64_t live = 0;             // ids with users
  std::vector<int32_t> fresh;   // slots admitted since the last refresh_union
  std::vector<float> panels;
  std::vector<int8_t> values;
  std::vector<float> scales;
  std::vector<int32_t> sums, int8_panels;
  ops::Int8Matrix int8;
};

}  // namespace tfm
