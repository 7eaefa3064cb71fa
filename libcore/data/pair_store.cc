#include "libcore/data/pair_store.h"

#include <cstring>

#include "libcore/base/error.h"

namespace tfm {

PairStore::PairStore(int64_t vocab_size)
    : vocab_size_(vocab_size), id_bytes_(id_bytes_for(vocab_size)) {}

unsigned char* PairStore::reserve(size_t bytes) {
  TFM_REQUIRE(bytes <= kSegmentBytes, "a sentence pair of {} bytes of ids is too long", bytes);
  if (segments_.empty() || used_ + bytes > kSegmentBytes) {
    // new[] without () leaves the bytes uninitialized: untouched pages cost no memory.
    segments_.emplace_back(new unsigned char[kSegmentBytes]);
    used_ = 0;
  }
  offsets_.push_back(uint64_t(segments_.size() - 1) << kSegmentShift | used_);
  unsigned char* at = segments_.back().get() + used_;
  used_ += bytes;
  return at;
}

void PairStore::add_packed(PairLength length, const void* ids) {
  const size_t bytes = size_t(length.src + length.tgt) * size_t(id_bytes_);
  std::memcpy(reserve(bytes), ids, bytes);
  added(length);
}

void PairStore::add(std::span<const int32_t> src, std::span<const int32_t> tgt) {
  const PairLength length{int32_t(src.size()), int32_t(tgt.size())};
  unsigned char* out = reserve((src.size() + tgt.size()) * size_t(id_bytes_));
  for (const auto side : {src, tgt})
    for (const int32_t id : side) {
      const uint32_t v = uint32_t(id);
      for (int b = 0; b < id_bytes_; ++b) *out++ = static_cast<unsigned char>(v >> (8 * b));
    }
  added(length);
}

void PairStore::added(PairLength length) {
  lengths_.push_back(length);
  src_tokens_ += length.src;
  tgt_tokens_ += length.tgt;
}

namespace {
std::vector<int32_t> unpack(const unsigned char* p, int32_t n, int id_bytes) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t k = 0; k < n; ++k, p += id_bytes) {
    uint32_t v = 0;
    for (int b = 0; b < id_bytes; ++b) v |= uint32_t(p[b]) << (8 * b);
    ids[size_t(k)] = int32_t(v);
  }
  return ids;
}
}  // namespace

std::vector<int32_t> PairStore::src(size_t i) const {
  return unpack(packed(i), lengths_.at(i).src, id_bytes_);
}
std::vector<int32_t> PairStore::tgt(size_t i) const {
  return unpack(packed(i) + size_t(lengths_.at(i).src) * size_t(id_bytes_), lengths_[i].tgt,
                id_bytes_);
}

}  // namespace tfm
