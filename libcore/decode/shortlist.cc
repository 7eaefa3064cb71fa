#include "libcore/decode/shortlist.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "libcore/base/error.h"
#include "libcore/data/line_reader.h"
#include "libcore/data/vocab.h"
#include "libcore/io/atomic_file.h"

namespace tfm {

namespace {

constexpr std::string_view kMagic = "tfm-shortlist";

// The space-separated pieces of s (runs of spaces count as one).
std::vector<std::string_view> split_pieces(std::string_view s) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (at < s.size()) {
    const size_t end = std::min(s.find(' ', at), s.size());
    if (end > at) out.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

void sort_unique(std::vector<int32_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

Shortlist::Shortlist(int64_t vocab_size, std::vector<int32_t> always, const std::vector<std::vector<int32_t>>& lists)
    : vocab_size_(vocab_size), always_(std::move(always)) {
  TFM_REQUIRE(static_cast<int64_t>(lists.size()) <= vocab_size, "a shortlist of {} source ids for {} ids",
              lists.size(), vocab_size);
  sort_unique(always_);
  offsets_.assign(static_cast<size_t>(vocab_size) + 1, 0);
  for (size_t s = 0; s < lists.size(); ++s) {
    for (int32_t t : lists[s]) {
      TFM_REQUIRE(t >= 0 && t < vocab_size, "shortlist target id {} is outside [0, {})", t, vocab_size);
      targets_.push_back(t);
    }
    longest_ = std::max<int64_t>(longest_, static_cast<int64_t>(lists[s].size()));
    offsets_[s + 1] = static_cast<int64_t>(targets_.size());
  }
  for (size_t s = lists.size(); s < static_cast<size_t>(vocab_size); ++s) offsets_[s + 1] = offsets_[s];
  for (int32_t t : always_) TFM_REQUIRE(t >= 0 && t < vocab_size, "shortlist id {} is outside [0, {})", t, vocab_size);
}

Shortlist Shortlist::load(const std::string& path, const Vocab& vocab, int64_t vocab_size) {
  data::LineReader reader(path);
  std::string line;
  auto where = [&] { return fmt::format("{}:{}", reader.path(), reader.line_number()); };
  auto bad = [&](std::string what) -> Error { return Error(std::move(what), where()); };
  if (!reader.next(line)) throw Error("an empty file, not a shortlist (tfm-tok shortlist writes one)", path);
  {
    const std::vector<std::string_view> head = split_pieces(line);
    if (head.size() < 2 || head[0] != kMagic)
      throw bad("not a shortlist: the first line must be 'tfm-shortlist 1' (tfm-tok shortlist writes one)");
    if (head[1] != "1") throw bad(fmt::format("shortlist version {} (this tfm reads 1)", printable(head[1])));
  }
  const std::string_view unk_piece = vocab.piece(vocab.unk_id());
  auto id_of = [&](std::string_view piece) {
    const int32_t id = vocab.id(piece);
    if (id == vocab.unk_id() && piece != unk_piece)
      throw bad(fmt::format("piece '{}' is not in the model's vocabulary (a shortlist of another tokenizer?)",
                            printable(piece)));
    if (id < 0 || id >= vocab_size)
      throw bad(fmt::format("piece '{}' has id {}, past the model's {} ids", printable(piece), id, vocab_size));
    return id;
  };
  Shortlist out;
  out.vocab_size_ = vocab_size;
  std::vector<std::vector<int32_t>> lists(static_cast<size_t>(vocab_size));
  std::vector<bool> seen(static_cast<size_t>(vocab_size), false);
  bool have_always = false;
  while (reader.next(line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos)
      throw bad("a line must be SOURCE<TAB>TARGETS (or <TAB>TARGETS: every sentence's)");
    const std::string_view src = std::string_view(line).substr(0, tab);
    const std::string_view rest = std::string_view(line).substr(tab + 1);
    if (rest.find('\t') != std::string_view::npos) throw bad("a line has one tab, after the source piece");
    std::vector<int32_t> ids;
    for (std::string_view piece : split_pieces(rest)) ids.push_back(id_of(piece));
    if (src.empty()) {
      if (have_always) throw bad("a second line of pieces every sentence gets (<TAB>TARGETS)");
      have_always = true;
      out.always_ = std::move(ids);
      continue;
    }
    const int32_t s = id_of(src);
    if (seen[static_cast<size_t>(s)]) throw bad(fmt::format("source piece '{}' has a line already", printable(src)));
    seen[static_cast<size_t>(s)] = true;
    lists[static_cast<size_t>(s)] = std::move(ids);
  }
  sort_unique(out.always_);
  out.offsets_.assign(static_cast<size_t>(vocab_size) + 1, 0);
  for (size_t s = 0; s < lists.size(); ++s) {
    out.targets_.insert(out.targets_.end(), lists[s].begin(), lists[s].end());
    out.longest_ = std::max<int64_t>(out.longest_, static_cast<int64_t>(lists[s].size()));
    out.offsets_[s + 1] = static_cast<int64_t>(out.targets_.size());
  }
  return out;
}

std::vector<int32_t> Shortlist::candidates(std::span<const int32_t> source, int32_t eos, int64_t at_least) const {
  std::vector<int32_t> out = always_;
  if (eos >= 0 && eos < vocab_size_) out.push_back(eos);
  for (int32_t s : source) {
    if (s < 0 || s >= vocab_size_) continue;
    const auto u = static_cast<size_t>(s);
    out.insert(out.end(), targets_.begin() + offsets_[u], targets_.begin() + offsets_[u + 1]);
  }
  sort_unique(out);
  // Filled up with the smallest ids missing, so that the beam's top k fits.
  const int64_t want = std::min(at_least, vocab_size_);
  if (static_cast<int64_t>(out.size()) < want) {
    std::vector<int32_t> more;
    size_t at = 0;
    for (int32_t id = 0; static_cast<int64_t>(out.size() + more.size()) < want; ++id) {
      while (at < out.size() && out[at] < id) ++at;
      if (at < out.size() && out[at] == id) continue;
      more.push_back(id);
    }
    out.insert(out.end(), more.begin(), more.end());
    sort_unique(out);
  }
  return out;
}

int64_t Shortlist::most(int64_t source_tokens, int64_t sentences, int64_t at_least) const {
  const double n = static_cast<double>(always_.size()) + 1 +
                   static_cast<double>(source_tokens) * static_cast<double>(longest_) +
                   static_cast<double>(sentences) * static_cast<double>(at_least);
  return std::min(vocab_size_, static_cast<int64_t>(std::min(n, 1e15)));
}

namespace {

// A position of a link: 1 to 9 decimal digits.
bool parse_position(std::string_view digits, int64_t& value) {
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  value = 0;
  for (char c : digits) value = value * 10 + (c - '0');
  return true;
}

// "I-J ..." or "TEXT ||| I-J ..." (tfm-decode --alignment pieces): the
// links, each checked against the pair's lengths.
std::vector<std::pair<int32_t, int32_t>> parse_links(std::string_view line, size_t src_len, size_t tgt_len,
                                                     const data::LineReader& reader) {
  if (const size_t bar = line.rfind("|||"); bar != std::string_view::npos) line.remove_prefix(bar + 3);
  const auto bad = [&](std::string what) {
    return Error(std::move(what), fmt::format("{}:{}", reader.path(), reader.line_number()));
  };
  std::vector<std::pair<int32_t, int32_t>> links;
  for (std::string_view link : split_pieces(line)) {
    const size_t dash = link.find('-');
    int64_t i = -1, j = -1;
    if (dash == std::string_view::npos || !parse_position(link.substr(0, dash), i) ||
        !parse_position(link.substr(dash + 1), j))
      throw bad(fmt::format("'{}' is not a link I-J (Pharaoh: 0-based source and target positions)",
                            printable(link)));
    if (i >= static_cast<int64_t>(src_len) || j >= static_cast<int64_t>(tgt_len))
      throw bad(fmt::format("link {}-{} is past the pair's {} source and {} target pieces", i, j, src_len,
                            tgt_len));
    links.emplace_back(static_cast<int32_t>(i), static_cast<int32_t>(j));
  }
  return links;
}

}  // namespace

ShortlistBuildTotals build_shortlist(const std::string& source, const std::string& target,
                                     const ShortlistBuildOptions& o) {
  TFM_REQUIRE(o.best >= 1 && o.frequent >= 0 && o.min_count >= 1,
              "--best and --min-count must be at least 1 and --frequent at least 0");
  const bool aligned = !o.alignments.empty();
  // TARGET may carry its own links (tfm-decode --alignment pieces writes
  // "PIECES ||| I-J ..."): one file read once.
  const bool links_in_target = aligned && o.alignments == target;
  // Pieces interned per side; counts by sentence pair, or by link.
  struct Side {
    std::unordered_map<std::string, int32_t> ids;
    std::vector<std::string> pieces;
    std::vector<int64_t> sentences, tokens;  // c(piece): pairs or links; as tokens
    int32_t intern(std::string_view p) {
      auto [it, added] = ids.try_emplace(std::string(p), static_cast<int32_t>(pieces.size()));
      if (added) {
        pieces.emplace_back(p);
        sentences.push_back(0);
        tokens.push_back(0);
      }
      return it->second;
    }
  } src, tgt;
  std::unordered_map<uint64_t, int64_t> pair;  // (s << 32 | t) -> c(s, t)
  const auto key = [](int32_t s, int32_t t) { return static_cast<uint64_t>(s) << 32 | static_cast<uint32_t>(t); };
  data::LineReader rs(source), rt(target);
  std::optional<data::LineReader> ra;
  if (aligned && !links_in_target) ra.emplace(o.alignments);
  std::string ls, lt, la;
  ShortlistBuildTotals totals;
  std::vector<int32_t> si, ti;
  for (;;) {
    const bool has_s = rs.next(ls), has_t = rt.next(lt);
    if (ra && ra->next(la) != has_s)
      fail("{} ends at line {} and {} goes on: the links have a line for each sentence pair",
           has_s ? o.alignments : source, has_s ? ra->line_number() : rs.line_number(),
           has_s ? source : o.alignments);
    if (!has_s && !has_t) break;
    if (has_s != has_t)
      fail("{} ends at line {} and {} goes on: a parallel corpus has as many lines on each side",
           has_s ? target : source, has_s ? rt.line_number() : rs.line_number(), has_s ? source : target);
    ++totals.pairs;
    std::string_view target_pieces = lt;
    if (links_in_target) target_pieces = target_pieces.substr(0, target_pieces.find("|||"));
    si.clear();
    ti.clear();
    for (std::string_view p : split_pieces(ls)) si.push_back(src.intern(p));
    for (std::string_view p : split_pieces(target_pieces)) {
      const int32_t t = tgt.intern(p);
      ++tgt.tokens[static_cast<size_t>(t)];
      ti.push_back(t);
    }
    if (aligned) {
      // c(s, t): links between s and t; c(s): links from s.
      for (const auto& [i, j] : parse_links(links_in_target ? lt : la, si.size(), ti.size(), ra ? *ra : rt)) {
        const int32_t s = si[static_cast<size_t>(i)], t = ti[static_cast<size_t>(j)];
        ++src.sentences[static_cast<size_t>(s)];
        ++pair[key(s, t)];
        ++totals.links;
      }
      continue;
    }
    sort_unique(si);
    sort_unique(ti);
    for (int32_t s : si) ++src.sentences[static_cast<size_t>(s)];
    for (int32_t t : ti) ++tgt.sentences[static_cast<size_t>(t)];
    for (int32_t s : si)
      for (int32_t t : ti) ++pair[key(s, t)];
  }
  // Each source piece's candidates.
  struct Cand {
    int32_t t;
    int64_t both;
    double score;
  };
  std::vector<std::vector<Cand>> cands(src.pieces.size());
  for (const auto& [st, both] : pair) {
    if (both < o.min_count) continue;
    const auto s = static_cast<size_t>(st >> 32);
    const auto t = static_cast<int32_t>(st & 0xffffffffu);
    // Links: the lexical probability p(t | s) = c(s, t) / c(s); pairs: Dice.
    const double score =
        aligned ? static_cast<double>(both) / static_cast<double>(src.sentences[s])
                : 2.0 * static_cast<double>(both) /
                      static_cast<double>(src.sentences[s] + tgt.sentences[static_cast<size_t>(t)]);
    cands[s].push_back({t, both, score});
  }
  std::string text = fmt::format("{} 1 best={} frequent={} min-count={} pairs={} by={}\n", kMagic, o.best,
                                 o.frequent, o.min_count, totals.pairs, aligned ? "links" : "sentences");
  std::vector<int32_t> freq(tgt.pieces.size());
  for (size_t t = 0; t < freq.size(); ++t) freq[t] = static_cast<int32_t>(t);
  std::sort(freq.begin(), freq.end(), [&](int32_t a, int32_t b) {
    const int64_t ca = tgt.tokens[static_cast<size_t>(a)], cb = tgt.tokens[static_cast<size_t>(b)];
    return ca != cb ? ca > cb : tgt.pieces[static_cast<size_t>(a)] < tgt.pieces[static_cast<size_t>(b)];
  });
  freq.resize(std::min(freq.size(), static_cast<size_t>(o.frequent)));
  if (!freq.empty()) {
    text += '\t';
    for (size_t i = 0; i < freq.size(); ++i) {
      if (i) text += ' ';
      text += tgt.pieces[static_cast<size_t>(freq[i])];
    }
    text += '\n';
  }
  std::vector<size_t> order(src.pieces.size());
  for (size_t s = 0; s < order.size(); ++s) order[s] = s;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return src.pieces[a] < src.pieces[b]; });
  for (size_t s : order) {
    std::vector<Cand>& c = cands[s];
    if (c.empty()) continue;
    std::sort(c.begin(), c.end(), [&](const Cand& a, const Cand& b) {
      if (a.score != b.score) return a.score > b.score;
      if (a.both != b.both) return a.both > b.both;
      return tgt.pieces[static_cast<size_t>(a.t)] < tgt.pieces[static_cast<size_t>(b.t)];
    });
    c.resize(std::min(c.size(), static_cast<size_t>(o.best)));
    text += src.pieces[s];
    text += '\t';
    for (size_t i = 0; i < c.size(); ++i) {
      if (i) text += ' ';
      text += tgt.pieces[static_cast<size_t>(c[i].t)];
    }
    text += '\n';
    ++totals.sources;
    totals.entries += static_cast<int64_t>(c.size());
  }
  io::write_file_atomic(o.output, text);
  return totals;
}

}  // namespace tfm
