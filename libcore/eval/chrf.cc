#include "libcore/eval/chrf.h"

#include <fmt/format.h>

#include "libcore/eval/bleu.h"
#include "libcore/eval/ngram.h"
#include "libcore/eval/unicode.h"

namespace tfm::eval {

namespace {

// One side of a segment: its characters and its words, as symbols.
struct Side {
  Symbols chars, words;
};

bool is_ascii_punct(char c) {  // Python's string.punctuation
  return std::string_view("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~").find(c) != std::string_view::npos;
}

bool single_code_point(std::string_view w) {
  size_t leads = 0;
  for (char c : w) leads += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return leads == 1;
}

// CHRF._remove_punctuation: a word's last (or else first) ASCII punctuation
// mark becomes a word of its own.
void chrf_words(std::string_view line, std::vector<std::string_view>& out) {
  std::vector<std::string_view> words;
  split_words(line, words);
  for (std::string_view w : words) {
    if (single_code_point(w)) {
      out.push_back(w);
    } else if (is_ascii_punct(w.back())) {
      out.push_back(w.substr(0, w.size() - 1));
      out.push_back(w.substr(w.size() - 1));
    } else if (is_ascii_punct(w.front())) {
      out.push_back(w.substr(0, 1));
      out.push_back(w.substr(1));
    } else {
      out.push_back(w);
    }
  }
}

struct ChrfScratch {
  std::vector<std::string> lines;
  std::vector<Side> sides;
  std::vector<std::vector<std::string_view>> words;
  std::vector<const std::vector<std::string_view>*> lists;
  std::vector<Symbols> word_ids;
  WordIds interner;
  NgramTable hyp, ref;
  std::u32string decoded;
};

// sides[0] is the hypothesis, sides[1..] the references.
void prepare(ChrfScratch& s, const ChrfOptions& o) {
  const size_t count = s.lines.size();
  s.sides.resize(count);
  s.words.resize(count);
  s.lists.clear();
  for (size_t k = 0; k < count; ++k) {
    if (o.lowercase) s.lines[k] = py_lower_utf8(s.lines[k]);
    s.decoded.clear();
    decode_utf8(s.lines[k], s.decoded);
    Symbols& chars = s.sides[k].chars;
    chars.clear();
    for (char32_t c : s.decoded)
      if (o.whitespace || !is_space(c)) chars.push_back(c);
    s.words[k].clear();
    if (o.word_order > 0) chrf_words(s.lines[k], s.words[k]);
    s.lists.push_back(&s.words[k]);
  }
  if (o.word_order > 0) {
    s.interner.assign(s.lists, s.word_ids);
    for (size_t k = 0; k < count; ++k) s.sides[k].words = std::move(s.word_ids[k]);
  }
}

// (hyp, ref, match) for each order of one hypothesis against one reference.
void match_stats(const Side& h, const Side& r, const ChrfOptions& o, ChrfScratch& s, ChrfStats& out) {
  out.clear();
  for (int order = 0; order < o.char_order + o.word_order; ++order) {
    const bool word = order >= o.char_order;
    const int n = word ? order - o.char_order + 1 : order + 1;
    const Symbols& hs = word ? h.words : h.chars;
    const Symbols& rs = word ? r.words : r.chars;
    s.hyp.build(hs, n);
    s.ref.build(rs, n);
    // "Don't count hits if no reference exists for that n-gram"
    out.push_back(s.ref.total > 0 ? s.hyp.total : 0);
    out.push_back(s.ref.total);
    out.push_back(clipped_matches(hs, s.hyp, rs, s.ref));
  }
}

}  // namespace

std::vector<ChrfStats> chrf_corpus_stats(const std::vector<std::string>& hyps,
                                         const std::vector<std::vector<std::string>>& refs,
                                         const ChrfOptions& o) {
  std::vector<ChrfStats> stats(hyps.size());
  for_each_segment(hyps.size(), [&](size_t i) {
    thread_local ChrfScratch s;
    thread_local ChrfStats candidate;
    s.lines.resize(refs.size() + 1);
    s.lines[0] = hyps[i];
    for (size_t r = 0; r < refs.size(); ++r) s.lines[r + 1] = refs[r][i];
    prepare(s, o);
    double best = -1.0;
    for (size_t r = 0; r < refs.size(); ++r) {
      match_stats(s.sides[0], s.sides[r + 1], o, s, candidate);
      const double f = chrf_score(candidate, o);
      if (f > best) {
        best = f;
        stats[i] = candidate;
      }
    }
  });
  return stats;
}

ChrfStats sum_chrf_stats(const std::vector<ChrfStats>& stats, const ChrfOptions& o) {
  ChrfStats sum(3 * static_cast<size_t>(o.char_order + o.word_order), 0);
  for (const ChrfStats& s : stats)
    for (size_t k = 0; k < sum.size(); ++k) sum[k] += s[k];
  return sum;
}

double chrf_score(const ChrfStats& stats, const ChrfOptions& o) {
  const double eps = 1e-16;
  const int order = o.char_order + o.word_order;
  const double factor = o.beta * o.beta;
  double score = 0.0, avg_prec = 0.0, avg_rec = 0.0;
  int effective_order = 0;
  for (int i = 0; i < order; ++i) {
    const int64_t n_hyp = stats[3 * i], n_ref = stats[3 * i + 1], n_match = stats[3 * i + 2];
    const double prec = n_hyp > 0 ? static_cast<double>(n_match) / static_cast<double>(n_hyp) : eps;
    const double rec = n_ref > 0 ? static_cast<double>(n_match) / static_cast<double>(n_ref) : eps;
    const double denom = factor * prec + rec;
    score += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (o.eps_smoothing) return 100 * score / order;
  if (effective_order == 0) {
    avg_prec = avg_rec = 0.0;
  } else {
    avg_prec /= effective_order;
    avg_rec /= effective_order;
  }
  if (avg_prec + avg_rec == 0) return 0.0;
  score = (1 + factor) * avg_prec * avg_rec;
  score /= (factor * avg_prec) + avg_rec;
  return 100 * score;
}

std::string chrf_name(const ChrfOptions& o) {
  return fmt::format("chrF{}{}", o.beta, std::string(static_cast<size_t>(o.word_order), '+'));
}

std::string chrf_signature(const ChrfOptions& o, int nrefs, std::string_view version) {
  return fmt::format("nrefs:{}|case:{}|eff:{}|nc:{}|nw:{}|space:{}|version:{}", nrefs,
                     o.lowercase ? "lc" : "mixed", o.eps_smoothing ? "no" : "yes", o.char_order,
                     o.word_order, o.whitespace ? "yes" : "no", version);
}

}  // namespace tfm::eval
