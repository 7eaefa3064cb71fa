#include "libcore/eval/ngram.h"

#include <algorithm>

namespace tfm::eval {

namespace {

// -1, 0, 1 as the n symbols at a compare with those at b.
int compare(const uint32_t* a, const uint32_t* b, int n) {
  for (int k = 0; k < n; ++k)
    if (a[k] != b[k]) return a[k] < b[k] ? -1 : 1;
  return 0;
}

}  // namespace

uint32_t WordIds::assign(std::span<const std::vector<std::string_view>* const> lists,
                         std::vector<Symbols>& out) {
  entries_.clear();
  out.resize(lists.size());
  for (uint32_t l = 0; l < lists.size(); ++l) {
    out[l].resize(lists[l]->size());
    for (uint32_t p = 0; p < lists[l]->size(); ++p) entries_.push_back({(*lists[l])[p], l, p});
  }
  std::sort(entries_.begin(), entries_.end(),
            [](const Entry& a, const Entry& b) { return a.word < b.word; });
  uint32_t id = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (i > 0 && entries_[i].word != entries_[i - 1].word) ++id;
    out[entries_[i].list][entries_[i].pos] = id;
  }
  return entries_.empty() ? 0 : id + 1;
}

void NgramTable::build(std::span<const uint32_t> seq, int order, uint64_t symbols) {
  n = order;
  start.clear();
  key.clear();
  count.clear();
  total = seq.size() >= static_cast<size_t>(n) ? static_cast<int64_t>(seq.size()) - n + 1 : 0;
  packed = n <= kMaxPackedOrder && symbols <= (uint64_t{1} << kPackedBits);
  if (packed) {
    keys_.resize(static_cast<size_t>(total));
    for (size_t i = 0; i < keys_.size(); ++i) {
      uint64_t k = 0;
      for (int j = 0; j < n; ++j) k = (k << kPackedBits) | seq[i + j];
      keys_[i] = k;
    }
    std::sort(keys_.begin(), keys_.end());
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (i > 0 && keys_[i] == keys_[i - 1]) {
        ++count.back();
      } else {
        key.push_back(keys_[i]);
        count.push_back(1);
      }
    }
    return;
  }
  scratch_.resize(static_cast<size_t>(total));
  for (uint32_t i = 0; i < scratch_.size(); ++i) scratch_[i] = i;
  const uint32_t* s = seq.data();
  if (n == 1) {
    std::sort(scratch_.begin(), scratch_.end(), [s](uint32_t a, uint32_t b) { return s[a] < s[b]; });
  } else {
    std::sort(scratch_.begin(), scratch_.end(),
              [s, this](uint32_t a, uint32_t b) { return compare(s + a, s + b, n) < 0; });
  }
  for (size_t i = 0; i < scratch_.size(); ++i) {
    if (i > 0 && compare(s + scratch_[i], s + scratch_[i - 1], n) == 0) {
      ++count.back();
    } else {
      start.push_back(scratch_[i]);
      count.push_back(1);
    }
  }
}

namespace {

// Calls f(i, j) for each n-gram a.start[i] that equals b.start[j].
template <typename F>
void for_each_common(std::span<const uint32_t> a_seq, const NgramTable& a,
                     std::span<const uint32_t> b_seq, const NgramTable& b, F f) {
  const size_t na = a.count.size(), nb = b.count.size();
  const bool packed = a.packed && b.packed;
  size_t j = 0;
  for (size_t i = 0; i < na && j < nb;) {
    const int c = packed ? (a.key[i] < b.key[j] ? -1 : a.key[i] > b.key[j])
                         : compare(a_seq.data() + a.start[i], b_seq.data() + b.start[j], a.n);
    if (c < 0) {
      ++i;
    } else if (c > 0) {
      ++j;
    } else {
      f(i++, j++);
    }
  }
}

}  // namespace

void occurrences(std::span<const uint32_t> a_seq, const NgramTable& a,
                 std::span<const uint32_t> b_seq, const NgramTable& b, std::vector<int32_t>& out) {
  out.assign(a.count.size(), 0);
  for_each_common(a_seq, a, b_seq, b, [&](size_t i, size_t j) { out[i] = b.count[j]; });
}

int64_t clipped_matches(std::span<const uint32_t> a_seq, const NgramTable& a,
                        std::span<const uint32_t> b_seq, const NgramTable& b) {
  int64_t matches = 0;
  for_each_common(a_seq, a, b_seq, b,
                  [&](size_t i, size_t j) { matches += std::min(a.count[i], b.count[j]); });
  return matches;
}

}  // namespace tfm::eval
