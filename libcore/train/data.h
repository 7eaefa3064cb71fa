// The training data as tfm-train sees it: a .tfmb corpus packed into
// length-bucketed batches, shuffled per epoch, handed out as HostBatches.
// This file is the one place tfm-train uses the corpus and batch-packing
// API of libcore/data, so a change there is adapted here alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "libcore/data/corpus.h"
#include "libcore/model/batch.h"
#include "libcore/model/transformer.h"

namespace tfm::train {

// What identifies a corpus for resuming: its vocabulary, its counts, and a
// digest (FNV-1a 64) of every length and id in order.
struct CorpusIdentity {
  std::string vocab;  // the vocabulary fingerprint
  int64_t pairs = 0, src_tokens = 0, tgt_tokens = 0;
  std::string digest;  // 16 hex digits
  std::string str() const;  // "29000 pairs, 377534 + 361284 tokens, digest 0123..."
  friend bool operator==(const CorpusIdentity&, const CorpusIdentity&) = default;
};

class BatchSource {
 public:
  // Reads `path` (validated) and packs its pairs into batches of at most
  // max_tokens tokens a side (padding counted); 0 keeps the file's batches.
  BatchSource(const std::string& path, int64_t max_tokens);

  const std::string& path() const { return path_; }
  const CorpusMeta& meta() const { return corpus_.meta(); }
  int64_t max_tokens() const { return max_tokens_; }
  size_t size() const { return batches_.size(); }      // batches
  size_t pairs() const { return corpus_.size(); }
  // How the model frames its pairs (model/batch.h): tfm's own unless set,
  // before the first batch and limits().
  void frame_for(const ModelConfig& config) { framing_ = Framing::of(config); }
  // Batch i (in packed order) as the model takes it: start/eos added.
  HostBatch batch(size_t i) const;
  // The target tokens batch i's loss counts (each sentence's words + eos).
  int64_t target_tokens(size_t i) const;
  // The largest batch's padded tokens on a side (B * S, B * (T + 1)) and the
  // longest sentence (S, T + 1): what the model's memory must be planned for.
  ModelLimits limits() const;
  CorpusIdentity identity() const;

 private:
  std::string path_;
  Corpus corpus_;
  int64_t max_tokens_;
  std::vector<BatchRange> batches_;
  Framing framing_;
};

// Limits covering every batch of every source.
ModelLimits limits_for(const std::vector<const BatchSource*>& sources);

// The order of `n` batches in epoch `epoch` (1-based): a permutation drawn
// by Fisher-Yates from Philox keyed by (seed, kShuffleStream, epoch), so it
// depends on nothing else and a resumed run draws the same one.
inline constexpr uint32_t kShuffleStream = 0x5f000001u;  // the Philox "tensor" of the batch order
std::vector<uint32_t> epoch_order(size_t n, uint64_t seed, int64_t epoch);

}  // namespace tfm::train
