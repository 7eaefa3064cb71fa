// chrF and chrF++ exactly as sacreBLEU 2.x computes them (metrics/chrf.py):
// character n-grams of the line without its whitespace (unless whitespace
// is kept), word n-grams after its punctuation splitting for chrF++, the
// reference with the best segment F-score when there are several, and
// either effective-order averaging (sacreBLEU's default) or chrF++.py's eps
// smoothing. Float operations in Python's order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::eval {

struct ChrfOptions {
  int char_order = 6;
  int word_order = 0;  // 2: chrF++
  int beta = 2;
  bool lowercase = false;
  bool whitespace = false;     // keep whitespace in character n-grams
  bool eps_smoothing = false;  // chrF++.py / Moses / NLTK smoothing instead of effective order
};

// Per segment: (hypothesis n-grams, reference n-grams, matches) for each
// character order, then each word order: 3 x (char_order + word_order).
using ChrfStats = std::vector<int64_t>;

std::vector<ChrfStats> chrf_corpus_stats(const std::vector<std::string>& hyps,
                                         const std::vector<std::vector<std::string>>& refs,
                                         const ChrfOptions& o);
// Statistics summed over segments.
ChrfStats sum_chrf_stats(const std::vector<ChrfStats>& stats, const ChrfOptions& o);
// CHRF._compute_f_score: 0..100.
double chrf_score(const ChrfStats& stats, const ChrfOptions& o);

// "chrF2", "chrF2++"
std::string chrf_name(const ChrfOptions& o);
// "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:VERSION"
std::string chrf_signature(const ChrfOptions& o, int nrefs, std::string_view version);

}  // namespace tfm::eval
