#include "libcore/data/text_pairs.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <optional>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <string_view>

#include "libcore/base/error.h"
#include "libcore/base/progress.h"
#include "libcore/data/line_reader.h"
#include "libcore/data/pipeline.h"

namespace tfm {

FilterCounts& FilterCounts::operator+=(const FilterCounts& o) {
  lines += o.lines;
  kept += o.kept;
  empty += o.empty;
  too_long += o.too_long;
  ratio += o.ratio;
  invalid_utf8 += o.invalid_utf8;
  src_unk += o.src_unk;
  tgt_unk += o.tgt_unk;
  return *this;
}

std::string TextPairs::where(const LineRef& r) const {
  return fmt::format("{}:{}", r.target ? tgt_path : src_path, r.line);
}

namespace {

constexpr std::string_view kTsvError = "a --tsv line must hold exactly one TAB between source and target";
constexpr std::string_view kUtf8Error = "the line is not valid UTF-8";

// A line that stops the run: the message and where.
struct Fatal {
  std::string_view what;
  LineRef at;
};

// Per-thread room for one line's pieces and their ids.
struct LineScratch {
  std::vector<std::string_view> pieces;
  std::vector<int32_t> ids;
};

// One chunk of lines and, after work, what became of them.
struct Chunk {
  std::string src, tgt;  // whole lines, each ending in '\n' (tgt unused for --tsv)
  int64_t first_line = 0;
  // Kept pairs: their ids, packed as PairStore wants them (ids16 when it
  // keeps 2 bytes an id), and their lengths.
  std::vector<uint16_t> ids16;
  std::vector<uint32_t> ids32;
  std::vector<PairLength> lengths;
  LineScratch scratch;
  FilterCounts counts;
  std::vector<LineRef> invalid;
  std::optional<Fatal> fatal;
};

// Bit k set when p[k] is a space, for k < min(n, 64). Reads 64 bytes at
// once where they lie before `readable` (the end of the chunk's text).
inline uint64_t space_mask(const char* p, size_t n, const char* readable) {
  uint64_t m = 0;
#if defined(__SSE2__)
  if (readable - p >= 64) {
    const __m128i space = _mm_set1_epi8(' ');
    for (int k = 0; k < 4; ++k) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
      m |= uint64_t(uint32_t(_mm_movemask_epi8(_mm_cmpeq_epi8(v, space)))) << (16 * k);
    }
    return n < 64 ? m & ((uint64_t{1} << n) - 1) : m;
  }
#endif
  for (size_t k = 0; k < std::min<size_t>(n, 64); ++k) m |= uint64_t(p[k] == ' ') << k;
  return m;
}

// The pieces of `line`: its runs of bytes other than ' '.
void split_pieces(std::string_view line, const char* readable, std::vector<std::string_view>& out) {
  const char* base = line.data();
  const size_t n = line.size();
  size_t start = 0;  // of the piece being read
  for (size_t block = 0; block < n; block += 64) {
    for (uint64_t m = space_mask(base + block, n - block, readable); m; m &= m - 1) {
      const size_t space = block + size_t(std::countr_zero(m));
      if (space > start) out.emplace_back(base + start, space - start);
      start = space + 1;
    }
  }
  if (n > start) out.emplace_back(base + start, n - start);
}

// Appends the ids of the pieces of `line` to `out`; counts unknown pieces in
// `unk`. False when the line is not valid UTF-8 (then `out` and `unk` hold
// partial results the caller drops). Bytes up to `readable` may be read.
template <typename Id>
bool append_ids(std::string_view line, const char* readable, const PieceTable& table,
                LineScratch& scratch, std::vector<Id>& out, int64_t& unk) {
  if (!table.all_valid_utf8() && !valid_utf8(line)) return false;
  scratch.pieces.clear();
  split_pieces(line, readable, scratch.pieces);
  const size_t n = scratch.pieces.size();
  scratch.ids.resize(n);
  table.find_many(scratch.pieces.data(), n, scratch.ids.data());
  const size_t base = out.size();
  out.resize(base + n);
  for (size_t k = 0; k < n; ++k) {
    int32_t id = scratch.ids[k];
    if (id < 0) {
      if (!valid_utf8(scratch.pieces[k])) return false;
      id = table.unk_id();
    }
    unk += id == table.unk_id();
    out[base + k] = Id(id);
  }
  return true;
}

// The chunk's work: filters and ids of every line pair, in order.
class Tokenizer {
 public:
  Tokenizer(const PieceTable& table, const TextFilter& filter) : table_(table), filter_(filter) {}

  template <typename Id>
  void run(Chunk& c, bool tsv, std::vector<Id>& ids) const {
    ids.clear();
    c.lengths.clear();
    c.invalid.clear();
    c.counts = {};
    c.fatal.reset();
    size_t s = 0, t = 0;  // start of the next line in c.src / c.tgt
    const char* src_readable = c.src.data() + c.src.size();  // split_pieces may read up to here
    const char* tgt_readable = tsv ? src_readable : c.tgt.data() + c.tgt.size();
    for (int64_t line = c.first_line; s < c.src.size(); ++line) {
      const size_t s_end = c.src.find('\n', s);
      std::string_view src(c.src.data() + s, s_end - s), tgt;
      s = s_end + 1;
      if (!src.empty() && src.back() == '\r') src.remove_suffix(1);
      if (tsv) {
        const size_t tab = src.find('\t');
        if (tab == src.npos || src.find('\t', tab + 1) != src.npos) {
          c.fatal = Fatal{kTsvError, {false, line}};
          break;
        }
        tgt = src.substr(tab + 1);
        src = src.substr(0, tab);
      } else {
        const size_t t_end = c.tgt.find('\n', t);
        tgt = std::string_view(c.tgt.data() + t, t_end - t);
        t = t_end + 1;
        if (!tgt.empty() && tgt.back() == '\r') tgt.remove_suffix(1);
      }
      if (!pair(c, src, src_readable, tgt, tgt_readable, LineRef{false, line}, ids)) break;
    }
  }

 private:
  // Filters one pair; false on a fatal line.
  template <typename Id>
  bool pair(Chunk& c, std::string_view src, const char* src_readable, std::string_view tgt,
            const char* tgt_readable, LineRef at, std::vector<Id>& ids) const {
    FilterCounts& n = c.counts;
    ++n.lines;
    const size_t start = ids.size();
    int64_t src_unk = 0, tgt_unk = 0;
    bool ok = append_ids(src, src_readable, table_, c.scratch, ids, src_unk);
    const size_t mid = ids.size();
    if (!ok || !append_ids(tgt, tgt_readable, table_, c.scratch, ids, tgt_unk)) {
      ids.resize(start);
      at.target = ok;  // the source was fine: the target is not
      if (filter_.strict) {
        c.fatal = Fatal{kUtf8Error, at};
        return false;
      }
      ++n.invalid_utf8;
      c.invalid.push_back(at);
      return true;
    }
    n.src_unk += src_unk;
    n.tgt_unk += tgt_unk;
    const double ls = double(mid - start), lt = double(ids.size() - mid);
    if (ls == 0 || lt == 0) ++n.empty;
    else if (ls > filter_.max_len || lt > filter_.max_len) ++n.too_long;
    else if (ls > filter_.max_ratio * lt || lt > filter_.max_ratio * ls) ++n.ratio;
    else {
      ++n.kept;
      c.lengths.push_back(PairLength{int32_t(ls), int32_t(lt)});
      return true;
    }
    ids.resize(start);
    return true;
  }

  const PieceTable& table_;
  const TextFilter& filter_;
};

// Runs the pipeline over chunks that `read` fills; returns the first fatal
// line, if any (the chunks after it are not appended).
template <typename Read>
std::optional<Fatal> tokenize_all(TextPairs& out, const PieceTable& table, const TextFilter& filter,
                                  const TextReadOptions& o, bool tsv, Read read) {
  TFM_REQUIRE(o.chunk_lines > 0, "cannot read text in chunks of 0 lines");
  const Tokenizer tok(table, filter);
  const bool narrow = out.pairs.id_bytes() == 2;
  std::optional<Fatal> fatal;     // set by commit, under its lock
  std::atomic<bool> stop = false;  // read by take, under another
  run_ordered<Chunk>(
      thread_count(o.threads), [&](Chunk& c) { return !stop && read(c); },
      [&](Chunk& c) { narrow ? tok.run(c, tsv, c.ids16) : tok.run(c, tsv, c.ids32); },
      [&](const Chunk& c) {
        if (fatal) return;  // chunks taken before the stop showed
        const size_t width = size_t(out.pairs.id_bytes());
        const auto* ids = narrow ? reinterpret_cast<const unsigned char*>(c.ids16.data())
                                 : reinterpret_cast<const unsigned char*>(c.ids32.data());
        for (const PairLength& l : c.lengths) {
          out.pairs.add_packed(l, ids);
          ids += size_t(l.src + l.tgt) * width;
        }
        out.counts += c.counts;
        out.invalid.insert(out.invalid.end(), c.invalid.begin(), c.invalid.end());
        if (c.fatal) {
          fatal = c.fatal;
          stop = true;
        }
      });
  return fatal;
}

// How far reading has come (called by the one thread taking a chunk).
void report(Progress* progress, const data::LineReader& in) {
  if (progress && progress->due())
    progress->report(reading_text(in.path(), in.line_number(), in.position(), in.size(), progress->seconds()),
                     true);
}

[[noreturn]] void throw_fatal(const TextPairs& out, const Fatal& f) {
  throw Error(std::string(f.what), out.where(f.at));
}

}  // namespace

TextPairs read_text_pairs(const std::string& src_path, const std::string& tgt_path,
                          const PieceTable& table, const TextFilter& filter,
                          const TextReadOptions& o) {
  data::LineReader src(src_path), tgt(tgt_path);
  TextPairs out(int64_t(table.size()));
  out.src_path = src.path();
  out.tgt_path = tgt.path();
  auto mismatch = [&] {
    std::string rest;
    while (src.next_block(rest, o.chunk_lines) > 0) {
    }
    while (tgt.next_block(rest, o.chunk_lines) > 0) {
    }
    if (src.line_number() != tgt.line_number())
      fail("{} has {} lines but {} has {}: source and target must pair line by line", src.path(),
           src.line_number(), tgt.path(), tgt.line_number());
  };
  const std::optional<Fatal> fatal =
      tokenize_all(out, table, filter, o, false, [&](Chunk& c) {
        c.first_line = src.line_number() + 1;
        const size_t n = src.next_block(c.src, o.chunk_lines);
        if (tgt.next_block(c.tgt, n > 0 ? n : 1) != n) mismatch();
        report(o.progress, src);
        return n > 0;
      });
  if (fatal) {
    mismatch();  // a mismatch is the error to report, wherever it shows
    throw_fatal(out, *fatal);
  }
  return out;
}

TextPairs read_tsv_pairs(const std::string& path, const PieceTable& table,
                         const TextFilter& filter, const TextReadOptions& o) {
  data::LineReader in(path);
  TextPairs out(int64_t(table.size()));
  out.src_path = out.tgt_path = in.path();
  const std::optional<Fatal> fatal = tokenize_all(out, table, filter, o, true, [&](Chunk& c) {
    c.first_line = in.line_number() + 1;
    const bool more = in.next_block(c.src, o.chunk_lines) > 0;
    report(o.progress, in);
    return more;
  });
  if (fatal) throw_fatal(out, *fatal);
  return out;
}

}  // namespace tfm
