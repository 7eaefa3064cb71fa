#include "libcore/eval/ter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "libcore/base/error.h"
#include "libcore/eval/bleu.h"
#include "libcore/eval/unicode.h"

namespace tfm::eval {

namespace {

constexpr int kMaxShiftSize = 10;
constexpr int kMaxShiftDist = 50;
constexpr int kBeamWidth = 25;
constexpr int kMaxShiftCandidates = 1000;
constexpr int64_t kInfinity = 10000000000000000;  // lib_ter's int(1e16)

// Edit operations, named as lib_ter.py names them while rewriting the
// hypothesis into the reference (the alignment flips insertions and deletions).
enum : char { kIns = 'i', kDel = 'd', kNop = ' ', kSub = 's', kUndef = 'x' };

// BeamEditDistance without its cache: every row is recomputed, which gives
// the same rows (a row depends only on the words before it, and all
// hypotheses of one segment have the same length).
class BeamEditDistance {
 public:
  explicit BeamEditDistance(const Symbols& ref) : ref_(ref) {}

  // The edit distance, and in `trace` the operations (hypothesis to reference).
  int64_t operator()(const Symbols& hyp, std::string* trace) {
    const size_t nh = hyp.size(), nr = ref_.size(), width = nr + 1;
    cost_.assign((nh + 1) * width, kInfinity);
    op_.assign((nh + 1) * width, kUndef);
    for (size_t j = 0; j <= nr; ++j) cost_[j] = static_cast<int64_t>(j), op_[j] = kIns;
    const double length_ratio = hyp.empty() ? 1.0 : static_cast<double>(nr) / static_cast<double>(nh);
    const int64_t beam = kBeamWidth < length_ratio / 2
                             ? static_cast<int64_t>(std::ceil(length_ratio / 2 + kBeamWidth))
                             : kBeamWidth;
    for (size_t i = 1; i <= nh; ++i) {
      const int64_t diag = static_cast<int64_t>(std::floor(static_cast<double>(i) * length_ratio));
      const int64_t min_j = std::max<int64_t>(0, diag - beam);
      int64_t max_j = std::min<int64_t>(static_cast<int64_t>(nr) + 1, diag + beam);
      if (i == nh) max_j = static_cast<int64_t>(nr) + 1;
      for (int64_t j = min_j; j < max_j; ++j) {
        const size_t at = i * width + static_cast<size_t>(j);
        if (j == 0) {
          cost_[at] = cost_[at - width] + 1;
          op_[at] = kDel;
          continue;
        }
        const bool same = hyp[i - 1] == ref_[static_cast<size_t>(j) - 1];
        // Ties prefer the substitution (or match), then deletion, then insertion.
        const std::pair<int64_t, char> ops[3] = {{cost_[at - width - 1] + (same ? 0 : 1), same ? kNop : kSub},
                                                 {cost_[at - width] + 1, kDel},
                                                 {cost_[at - 1] + 1, kIns}};
        for (const auto& [c, o] : ops) {
          if (cost_[at] > c) {
            cost_[at] = c;
            op_[at] = o;
          }
        }
      }
    }
    if (trace != nullptr) {
      trace->clear();
      size_t i = nh, j = nr;
      while (i > 0 || j > 0) {
        const char o = op_[i * width + j];
        trace->push_back(o);
        if (o == kSub || o == kNop) {
          --i, --j;
        } else if (o == kIns) {
          --j;
        } else if (o == kDel) {
          --i;
        } else {
          fail("TER: the edit distance left an undefined cell at ({}, {})", i, j);
        }
      }
      std::reverse(trace->begin(), trace->end());
    }
    return cost_[nh * width + nr];
  }

 private:
  const Symbols& ref_;
  std::vector<int64_t> cost_;
  std::vector<char> op_;
};

// trace_to_alignment on the flipped trace: for each reference position the
// hypothesis position it aligns to, and which positions are errors.
struct Alignment {
  std::vector<int64_t> align;  // per reference word
  std::vector<char> ref_err, hyp_err;
};

Alignment align_trace(const std::string& trace) {
  Alignment a;
  int64_t pos_hyp = -1;
  for (char o : trace) {
    if (o == kIns) o = kDel;  // flipped: rewriting the reference into the hypothesis
    else if (o == kDel) o = kIns;
    if (o == kNop || o == kSub) {
      ++pos_hyp;
      a.align.push_back(pos_hyp);
      a.hyp_err.push_back(o == kSub);
      a.ref_err.push_back(o == kSub);
    } else if (o == kIns) {
      ++pos_hyp;
      a.hyp_err.push_back(1);
    } else {
      a.align.push_back(pos_hyp);
      a.ref_err.push_back(1);
    }
  }
  return a;
}

// words[a:b] with Python's clamping.
void append_slice(const Symbols& w, int64_t a, int64_t b, Symbols& out) {
  const int64_t n = static_cast<int64_t>(w.size());
  a = std::clamp<int64_t>(a, 0, n);
  b = std::clamp<int64_t>(b, 0, n);
  if (a < b) out.insert(out.end(), w.begin() + a, w.begin() + b);
}

// _perform_shift: the block words[start:start+length] moved before `target`.
void perform_shift(const Symbols& w, int64_t start, int64_t length, int64_t target, Symbols& out) {
  out.clear();
  const int64_t end = static_cast<int64_t>(w.size());
  if (target < start) {
    append_slice(w, 0, target, out);
    append_slice(w, start, start + length, out);
    append_slice(w, target, start, out);
    append_slice(w, start + length, end, out);
  } else if (target > start + length) {
    append_slice(w, 0, start, out);
    append_slice(w, start + length, target, out);
    append_slice(w, start, start + length, out);
    append_slice(w, target, end, out);
  } else {
    append_slice(w, 0, start, out);
    append_slice(w, start + length, length + target, out);
    append_slice(w, start, start + length, out);
    append_slice(w, length + target, end, out);
  }
}

bool any_error(const std::vector<char>& err, int64_t from, int64_t length) {
  return std::any_of(err.begin() + from, err.begin() + from + length, [](char e) { return e != 0; });
}

// _shift: the best shift of one block, or gain 0 when none helps.
struct ShiftResult {
  int64_t gain = 0;
  Symbols words;
};

ShiftResult best_shift(const Symbols& h, const Symbols& r, BeamEditDistance& ed, int& checked) {
  std::string trace;
  const int64_t pre_score = ed(h, &trace);
  const Alignment a = align_trace(trace);
  const int64_t nh = static_cast<int64_t>(h.size()), nr = static_cast<int64_t>(r.size());
  bool found = false;
  std::tuple<int64_t, int64_t, int64_t, int64_t> best{};  // (gain, length, -start_h, -target)
  ShiftResult result;
  Symbols shifted;
  for (int64_t sh = 0; sh < nh && checked < kMaxShiftCandidates; ++sh) {
    for (int64_t sr = 0; sr < nr && checked < kMaxShiftCandidates; ++sr) {
      if (std::abs(sr - sh) > kMaxShiftDist) continue;
      // _find_shifted_pairs: every common run starting here, shortest first.
      for (int64_t length = 1; length <= kMaxShiftSize && h[sh + length - 1] == r[sr + length - 1];
           ++length) {
        if (any_error(a.hyp_err, sh, length) && any_error(a.ref_err, sr, length) &&
            !(sh <= a.align[sr] && a.align[sr] < sh + length)) {
          int64_t prev = -1;
          for (int64_t offset = -1; offset < length; ++offset) {
            const int64_t target = sr + offset == -1 ? 0 : a.align[sr + offset] + 1;
            if (target == prev) continue;
            prev = target;
            perform_shift(h, sh, length, target, shifted);
            const std::tuple<int64_t, int64_t, int64_t, int64_t> candidate{
                pre_score - ed(shifted, nullptr), length, -sh, -target};
            ++checked;
            if (!found || candidate > best) {
              found = true;
              best = candidate;
              result.words = shifted;
            }
          }
          if (checked >= kMaxShiftCandidates) break;
        }
        if (sh + length == nh || sr + length == nr) break;
      }
    }
  }
  result.gain = found ? std::get<0>(best) : 0;
  if (!found) result.words = h;
  return result;
}

}  // namespace

int64_t translation_edits(const Symbols& hyp, const Symbols& ref) {
  if (ref.empty()) return static_cast<int64_t>(hyp.size());
  BeamEditDistance ed(ref);
  int64_t shifts = 0;
  Symbols words = hyp;
  int checked = 0;
  while (true) {
    ShiftResult s = best_shift(words, ref, ed, checked);
    if (checked >= kMaxShiftCandidates || s.gain <= 0) break;
    ++shifts;
    words = std::move(s.words);
  }
  return shifts + ed(words, nullptr);
}

std::vector<TerStats> ter_corpus_stats(const std::vector<std::string>& hyps,
                                       const std::vector<std::vector<std::string>>& refs,
                                       const TerOptions& o) {
  std::vector<TerStats> stats(hyps.size());
  for_each_segment(hyps.size(), [&](size_t i) {
    thread_local std::vector<std::string> lines;
    thread_local std::vector<std::vector<std::string_view>> words;
    thread_local std::vector<const std::vector<std::string_view>*> lists;
    thread_local std::vector<Symbols> ids;
    thread_local WordIds interner;
    lines.resize(refs.size() + 1);
    words.resize(refs.size() + 1);
    lists.clear();
    for (size_t k = 0; k <= refs.size(); ++k) {
      lines[k] = normalize_ter(rstrip(k == 0 ? hyps[i] : refs[k - 1][i]), o);
      words[k].clear();
      split_words(lines[k], words[k]);
      lists.push_back(&words[k]);
    }
    interner.assign(lists, ids);
    int64_t best = kInfinity, ref_lengths = 0;
    for (size_t r = 1; r <= refs.size(); ++r) {
      const int64_t edits = translation_edits(ids[0], ids[r]);
      ref_lengths += static_cast<int64_t>(ids[r].size());
      best = std::min(best, edits);
    }
    stats[i] = {best, static_cast<double>(ref_lengths) / static_cast<double>(refs.size())};
  });
  return stats;
}

double ter_score(const std::vector<TerStats>& stats) {
  int64_t edits = 0;
  double ref_len = 0;
  for (const TerStats& s : stats) {
    edits += s.edits;
    ref_len += s.ref_len;
  }
  double score = 0.0;
  if (ref_len > 0) {
    score = static_cast<double>(edits) / ref_len;
  } else if (edits > 0) {
    score = 1.0;  // empty references and a non-empty hypothesis
  }
  return 100 * score;
}

std::string ter_signature(const TerOptions& o, int nrefs, std::string_view version) {
  return fmt::format("nrefs:{}|case:{}|tok:tercom|norm:{}|punct:{}|asian:no|version:{}", nrefs,
                     o.case_sensitive ? "mixed" : "lc", o.normalized ? "yes" : "no",
                     o.no_punct ? "no" : "yes", version);
}

}  // namespace tfm::eval
