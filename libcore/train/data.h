// The training data as tfm-train sees it: a .tfmb corpus packed into
// length-bucketed batches, shuffled per epoch, handed out as HostBatches.
// This file is the one place tfm-train uses the corpus and batch-packing
// API of libcore/data, so a change there is adapted here alone.
#pragma once

#include <cstdint>
#include <memory>
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
  // The sentence pairs of batch i.
  int64_t batch_pairs(size_t i) const;
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

// A batch of the training corpora: which corpus (in the order given) and
// which of its batches (in packed order).
struct BatchRef {
  uint32_t corpus = 0;
  uint32_t batch = 0;
  friend bool operator==(const BatchRef&, const BatchRef&) = default;
};

// The training corpora (tfm-train's TRAIN...), each packed on its own (a
// batch never mixes corpora) with the same --max-tokens. Their weights are
// the run's options (TrainOptions::weights).
class TrainCorpora {
 public:
  // max_tokens 0: as the first corpus is packed, and the others packed
  // alike (so a resumed run, given the first's explicitly, packs the same).
  TrainCorpora(const std::vector<std::string>& paths, int64_t max_tokens);

  size_t count() const { return sources_.size(); }
  const BatchSource& operator[](size_t c) const { return *sources_.at(c); }
  BatchSource& operator[](size_t c) { return *sources_.at(c); }
  const BatchSource& first() const { return *sources_.front(); }
  int64_t max_tokens() const { return first().max_tokens(); }
  std::vector<const BatchSource*> sources() const;
  std::vector<CorpusIdentity> identities() const;
  // The batches of each corpus, in order: what mixed_epoch_order draws from.
  std::vector<size_t> sizes() const;

  HostBatch batch(BatchRef b) const { return (*this)[b.corpus].batch(b.batch); }
  int64_t target_tokens(BatchRef b) const { return (*this)[b.corpus].target_tokens(b.batch); }
  int64_t pairs(BatchRef b) const { return (*this)[b.corpus].batch_pairs(b.batch); }

 private:
  std::vector<std::unique_ptr<BatchSource>> sources_;
};

// The order of `n` batches in epoch `epoch` (1-based): a permutation drawn
// by Fisher-Yates from Philox keyed by (seed, kShuffleStream, epoch), so it
// depends on nothing else and a resumed run draws the same one.
inline constexpr uint32_t kShuffleStream = 0x5f000001u;  // the Philox "tensor" of the batch order
std::vector<uint32_t> epoch_order(size_t n, uint64_t seed, int64_t epoch);

// Weighted corpora (--weights, fairseq's and Marian's upsampling): the
// batches an epoch draws from a corpus of n batches weighted F, floor(F)
// copies of each and round(frac(F) * n) more; Error when that is more than
// an epoch can order.
int64_t batches_drawn(size_t n, double weight);

// The batches epoch `epoch` draws from corpus `corpus` (n batches, weight
// F), before the shuffle: floor(F) copies of 0..n-1, then the fractional
// subset, round(frac(F) * n) batches drawn without replacement by a
// partial Fisher-Yates from Philox keyed by (seed, kWeightStream, epoch),
// block (corpus << 32 | draw), and sorted. A new subset every epoch.
inline constexpr uint32_t kWeightStream = 0x5f000002u;  // the Philox "tensor" of the subsets
std::vector<uint32_t> drawn_batches(size_t n, double weight, uint32_t corpus, uint64_t seed,
                                    int64_t epoch);

// The order of epoch `epoch` over corpora of sizes[c] batches weighted
// weights[c]: every corpus's drawn_batches, corpus after corpus, permuted
// by epoch_order (seed, epoch) of their count. One corpus of weight 1
// gives epoch_order itself: {0, epoch_order(n)[i]}.
std::vector<BatchRef> mixed_epoch_order(const std::vector<size_t>& sizes,
                                        const std::vector<double>& weights, uint64_t seed,
                                        int64_t epoch);
// The length of every epoch's mixed_epoch_order (the same each epoch).
int64_t epoch_batches(const std::vector<size_t>& sizes, const std::vector<double>& weights);

}  // namespace tfm::train
