// The .tfmb binarized corpus (man/tfm-batch.1, "FILE FORMAT"): sentence
// pairs as token ids, sorted into length buckets (batcher.h), stored in
// zstd-compressed blocks under CRC-32s, with the batches they were packed into.
// The reader validates every byte and every length against the file: a
// truncated, corrupt, foreign or old-version file is one tfm::Error naming
// the file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "libcore/data/batcher.h"
#include "libcore/data/pair_store.h"

namespace tfm {

class Progress;

// Version 2: ids 2 bytes wide when the vocabulary allows, lengths 2 bytes,
// and the shell order of batcher.h (version 1 sorted by target length).
inline constexpr uint32_t kCorpusVersion = 2;
inline constexpr int32_t kCorpusMaxLen = kBucketMaxLen;  // the longest --max-len a file may hold

struct CorpusMeta {
  std::string fingerprint;  // of the vocabulary the ids come from (<= 43 bytes)
  int64_t vocab_size = 0;
  int32_t max_len = 250;    // every stored sentence has 1..max_len tokens
  int64_t max_tokens = 25000;
};

struct CorpusWriteOptions {
  int threads = 0;  // blocks compressed at once; 0: every core
  Progress* progress = nullptr;  // blocks written of all, after each
};

// What write_corpus wrote.
struct CorpusSummary {
  uint64_t bytes = 0;
  PackingStats packing;  // of the stored batches
};

// Sorts the pairs into buckets, packs them with meta.max_tokens and writes
// `path` atomically, compressing blocks on several threads. Throws Error on
// pairs that break meta (empty, too long, ids outside the vocabulary, a
// store made for another vocabulary size).
CorpusSummary write_corpus(const std::string& path, const CorpusMeta& meta, const PairStore& pairs,
                           const CorpusWriteOptions& options = {});

// A .tfmb file read whole into memory and validated.
class Corpus {
 public:
  static Corpus read(const std::string& path);

  const CorpusMeta& meta() const { return meta_; }
  uint32_t version() const { return version_; }
  uint64_t file_bytes() const { return file_bytes_; }
  size_t size() const { return lengths_.size(); }  // pairs, in bucket order
  int64_t src_tokens() const { return src_tokens_; }
  int64_t tgt_tokens() const { return tgt_tokens_; }
  std::span<const int32_t> src(size_t i) const;
  std::span<const int32_t> tgt(size_t i) const;
  const std::vector<PairLength>& lengths() const { return lengths_; }
  // The batches stored in the file (packed with meta().max_tokens).
  const std::vector<BatchRange>& batches() const { return batches_; }
  // The same pairs packed again with another budget (the bucket order is
  // good at every budget; batcher.h).
  std::vector<BatchRange> repack(int64_t max_tokens) const {
    return pack_batches(lengths_, max_tokens);
  }

 private:
  CorpusMeta meta_;
  uint32_t version_ = 0;
  uint64_t file_bytes_ = 0;
  int64_t src_tokens_ = 0, tgt_tokens_ = 0;
  std::vector<PairLength> lengths_;
  std::vector<uint64_t> offsets_;  // of each pair's source in ids_; target follows
  std::vector<int32_t> ids_;
  std::vector<BatchRange> batches_;
};

}  // namespace tfm
