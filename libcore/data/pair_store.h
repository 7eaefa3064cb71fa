// Sentence pairs as token ids in flat storage, as tfm-batch holds a whole
// corpus between reading it and writing the .tfmb: each pair's source ids
// then its target ids, back to back, with one offset and one PairLength per
// pair. No per-pair allocations; ids take 2 bytes when the vocabulary has at
// most 65,536 pieces (the width the .tfmb stores them in), else 4; and the
// ids live in fixed segments, so growing never copies them (a growing
// vector would need twice the memory at the moment it moves).
#pragma once

#include <bit>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "libcore/data/batcher.h"

namespace tfm {

static_assert(std::endian::native == std::endian::little,
              "the packed ids are the .tfmb's little-endian bytes as they lie in memory");

// Bytes per id for a vocabulary of `vocab_size` pieces: 2 or 4.
inline int id_bytes_for(int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

class PairStore {
 public:
  explicit PairStore(int64_t vocab_size);
  PairStore(PairStore&&) noexcept = default;
  PairStore& operator=(PairStore&&) noexcept = default;

  int64_t vocab_size() const { return vocab_size_; }
  int id_bytes() const { return id_bytes_; }
  size_t size() const { return lengths_.size(); }
  int64_t src_tokens() const { return src_tokens_; }
  int64_t tgt_tokens() const { return tgt_tokens_; }
  const std::vector<PairLength>& lengths() const { return lengths_; }

  // Appends a pair. Lengths and ids are the caller's contract (the .tfmb
  // writer checks them): ids below vocab_size(), lengths at most 1024.
  void add(std::span<const int32_t> src, std::span<const int32_t> tgt);
  // The same from ids already id_bytes() wide (little-endian), source then
  // target: (src + tgt) x id_bytes() bytes.
  void add_packed(PairLength length, const void* ids);

  // Pair i's ids, source then target, id_bytes() wide.
  const unsigned char* packed(size_t i) const {
    return segments_[offsets_[i] >> kSegmentShift].get() + (offsets_[i] & (kSegmentBytes - 1));
  }
  // Pair i's ids as int32 (for tests and tools; the writer uses packed()).
  std::vector<int32_t> src(size_t i) const;
  std::vector<int32_t> tgt(size_t i) const;

 private:
  static constexpr int kSegmentShift = 22;  // 4 MiB segments
  static constexpr uint64_t kSegmentBytes = uint64_t{1} << kSegmentShift;
  unsigned char* reserve(size_t bytes);  // room for one pair in the last segment
  void added(PairLength length);

  int64_t vocab_size_;
  int id_bytes_;
  std::vector<std::unique_ptr<unsigned char[]>> segments_;
  size_t used_ = 0;                 // bytes taken in the last segment
  std::vector<uint64_t> offsets_;   // of each pair: segment << kSegmentShift | byte in it
  std::vector<PairLength> lengths_;
  int64_t src_tokens_ = 0, tgt_tokens_ = 0;
};

}  // namespace tfm
