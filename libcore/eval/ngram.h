// N-grams on sequences of integer symbols (a segment's words as ids, or its
// characters as code points), shared by BLEU and chrF. An n-gram is a run of
// n symbols compared exactly; tables are sorted, so matching two of them is
// one merge and no hashing can confuse two n-grams.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tfm::eval {

using Symbols = std::vector<uint32_t>;

// The words of several token lists as ids, equal words equal ids. The ids
// are local to one call: a segment interns its hypothesis and references
// together and keeps no table across segments.
class WordIds {
 public:
  // out[k] receives the ids of *lists[k]; returns how many distinct words.
  uint32_t assign(std::span<const std::vector<std::string_view>* const> lists,
              std::vector<Symbols>& out);

 private:
  struct Entry {
    std::string_view word;
    uint32_t list, pos;
  };
  std::vector<Entry> entries_;
};

// The distinct n-grams of one order in a sequence, sorted, with their counts.
// Short n-grams of small symbols are packed into one 64-bit key each (the
// fast path of BLEU: words of a segment have small ids); two tables are
// compared only when built the same way.
struct NgramTable {
  std::vector<uint32_t> start;  // where each distinct n-gram occurs (unpacked tables)
  std::vector<uint64_t> key;    // each distinct n-gram's packed symbols (packed tables)
  std::vector<int32_t> count;   // how often it occurs
  int n = 0;
  bool packed = false;
  int64_t total = 0;            // n-grams in the sequence: max(0, length - n + 1)

  // Packs when `symbols` (an upper bound of the symbols, exclusive) and the
  // order allow it: n <= kMaxPackedOrder and symbols <= 2^kPackedBits.
  void build(std::span<const uint32_t> seq, int order, uint64_t symbols = UINT64_MAX);

  static constexpr int kPackedBits = 16;
  static constexpr int kMaxPackedOrder = 4;

 private:
  std::vector<uint32_t> scratch_;
  std::vector<uint64_t> keys_;
};

// For each n-gram of `a` (over a_seq), how often it occurs in `b` (over
// b_seq): out[i] belongs to a.start[i]. Both tables have the same order.
void occurrences(std::span<const uint32_t> a_seq, const NgramTable& a,
                 std::span<const uint32_t> b_seq, const NgramTable& b, std::vector<int32_t>& out);

// sum over the n-grams of a of min(count in a, count in b).
int64_t clipped_matches(std::span<const uint32_t> a_seq, const NgramTable& a,
                        std::span<const uint32_t> b_seq, const NgramTable& b);

}  // namespace tfm::eval
