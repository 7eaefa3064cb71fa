// Length bucketing and token-count packing (the paper's "sentence pairs were
// batched together by approximate sequence length ... approximately 25000
// source tokens and 25000 target tokens").
//
// Contract: pairs are sorted by (target length, source length), so pairs of
// one target length form a bucket and lie sorted by source length inside it.
// A batch is a run of consecutive sorted pairs. Its cost on a side counts the
// padding: sentences x longest sentence on that side. pack_batches keeps both
// costs <= max_tokens; a single pair longer than max_tokens forms a batch of
// its own (it cannot be split).
#pragma once

#include <cstdint>
#include <vector>

namespace tfm {

struct PairLength {
  int32_t src = 0, tgt = 0;  // tokens, without bos/eos
};

struct BatchRange {
  uint32_t first = 0, count = 0;  // pairs [first, first + count) in sorted order
};

// The permutation that sorts `lengths` into buckets: order[k] is the index
// of the k-th pair. Stable: equal lengths keep their input order.
std::vector<uint32_t> bucket_order(const std::vector<PairLength>& lengths);

// Packs pairs, already in bucket order, greedily into batches.
std::vector<BatchRange> pack_batches(const std::vector<PairLength>& sorted, int64_t max_tokens);

// Padded cost of one batch on each side.
struct BatchCost {
  int64_t src = 0, tgt = 0;
};
BatchCost batch_cost(const std::vector<PairLength>& sorted, const BatchRange& b);

// Real tokens and padded tokens per side over all batches; efficiency =
// real / padded (1 when there is nothing).
struct PackingStats {
  int64_t batches = 0;
  int64_t src_real = 0, src_padded = 0, tgt_real = 0, tgt_padded = 0;
  double src_efficiency() const { return src_padded ? double(src_real) / double(src_padded) : 1.0; }
  double tgt_efficiency() const { return tgt_padded ? double(tgt_real) / double(tgt_padded) : 1.0; }
};
PackingStats packing_stats(const std::vector<PairLength>& sorted,
                           const std::vector<BatchRange>& batches);

}  // namespace tfm
