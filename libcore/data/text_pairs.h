// Tokenized parallel text (pieces separated by spaces, as tfm-tok and
// spm_encode write them) -> sentence pairs of ids, with tfm-batch's filters.
//
// The input is streamed in chunks of lines (plain or gzip, "-" for stdin):
// it is never held whole as text. Chunks are tokenized on every core and
// appended in input order, so the result does not depend on the threads.
// UTF-8 is checked only where it can fail: a piece the vocabulary holds is
// valid UTF-8 already (PieceTable::all_valid_utf8; else whole lines are
// checked), and a line of valid pieces and ASCII spaces is valid UTF-8, so
// only unknown pieces are looked at byte by byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "libcore/data/pair_store.h"
#include "libcore/data/piece_table.h"

namespace tfm {

class Progress;

struct TextFilter {
  int32_t max_len = 250;
  double max_ratio = 9;
  bool strict = false;  // invalid UTF-8 is an Error (with file:line) instead of a skip
};

struct TextReadOptions {
  int threads = 0;            // 0: every core
  size_t chunk_lines = 8192;  // lines tokenized as one piece of work
  Progress* progress = nullptr;  // lines and bytes of the source read, after each chunk
};

struct FilterCounts {
  int64_t lines = 0, kept = 0;
  int64_t empty = 0, too_long = 0, ratio = 0, invalid_utf8 = 0;
  int64_t src_unk = 0, tgt_unk = 0;  // pieces the vocabulary does not know
  FilterCounts& operator+=(const FilterCounts& o);
};

// One input line: of the source or of the target, 1-based.
struct LineRef {
  bool target = false;
  int64_t line = 0;
};

struct TextPairs {
  explicit TextPairs(int64_t vocab_size) : pairs(vocab_size) {}
  PairStore pairs;
  FilterCounts counts;
  std::vector<LineRef> invalid;      // the lines skipped as invalid UTF-8, in input order
  std::string src_path, tgt_path;    // as messages name them; one file for --tsv
  std::string where(const LineRef& r) const;  // "FILE:LINE"
};

// Parallel files: line i of `src_path` pairs with line i of `tgt_path`.
// Different line counts are an error naming both files and both counts, and
// it wins over any error in the lines themselves.
TextPairs read_text_pairs(const std::string& src_path, const std::string& tgt_path,
                          const PieceTable& pieces, const TextFilter& filter,
                          const TextReadOptions& options = {});
// One file of "SOURCE<TAB>TARGET" lines; a line without exactly one TAB is
// an error naming its line.
TextPairs read_tsv_pairs(const std::string& path, const PieceTable& pieces,
                         const TextFilter& filter, const TextReadOptions& options = {});

}  // namespace tfm
