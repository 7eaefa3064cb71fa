// Length bucketing and token-count packing (the paper's "sentence pairs were
// batched together by approximate sequence length ... approximately 25000
// source tokens and 25000 target tokens").
//
// The order: pairs are sorted by bucket_key, which walks the (source length,
// target length) plane in L-shaped shells of the longer side m = max(src,
// tgt). Inside a shell the pairs run along the L by their length difference,
// in alternating directions from one shell to the next (odd m: ascending
// tgt - src, even m: ascending src - tgt), so the walk never jumps: the end
// of shell m lies next to the start of shell m + 1. Any run of consecutive
// pairs therefore has close lengths on BOTH sides, whatever its size, and
// re-packing the same order with another budget stays efficient. (Sorting by
// target then source length, the order of format version 1, pads the source
// side badly once a batch spans more than one target length; man
// tfm-batch(1) gives the measurements.)
//
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

// Lengths up to this many tokens have a bucket key (kCorpusMaxLen, corpus.h).
inline constexpr int32_t kBucketMaxLen = 1024;

// The sort key of the order above, < 2^22; both lengths in 1..kBucketMaxLen.
// Two pairs share a key exactly when they share both lengths.
inline uint32_t bucket_key(PairLength l) {
  const int32_t m = l.src > l.tgt ? l.src : l.tgt;
  const int32_t along = (m & 1) ? l.tgt - l.src : l.src - l.tgt;  // in -(m-1) .. m-1
  return uint32_t(m) << 11 | uint32_t(along + kBucketMaxLen);
}

// The permutation that sorts `lengths` by bucket_key: order[k] is the index
// of the k-th pair. Stable: equal lengths keep their input order. O(n): a
// radix sort of the keys.
std::vector<uint32_t> bucket_order(const std::vector<PairLength>& lengths);

// Packs pairs, already in bucket order, greedily into batches (the fewest
// batches this order allows).
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
