// TER exactly as sacreBLEU 2.x computes it (metrics/ter.py, lib_ter.py, a
// re-implementation of tercom): words from the tercom normalizer, greedy
// block shifts (at most 10 words, at most 50 positions away, ranked by edit
// distance gained, then length, then the earliest start and target), a
// beam-limited edit distance (width 25 around the length-scaled diagonal),
// and sacreBLEU's cap of 1000 shift candidates per segment. The edit
// distance cache of lib_ter.py only saves work and is not needed here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/eval/ngram.h"
#include "libcore/eval/tokenize.h"

namespace tfm::eval {

using TerOptions = TerNormalizeOptions;

// One segment: the fewest edits over the references, and their mean length.
struct TerStats {
  int64_t edits = 0;
  double ref_len = 0;
};

// lib_ter.translation_edit_rate: edits (shifts + edit distance) turning
// `hyp` into `ref`, words as ids. An empty reference costs every hypothesis word.
int64_t translation_edits(const Symbols& hyp, const Symbols& ref);

std::vector<TerStats> ter_corpus_stats(const std::vector<std::string>& hyps,
                                       const std::vector<std::vector<std::string>>& refs,
                                       const TerOptions& o);
// 100 x edits / reference words over the corpus (sums in segment order).
double ter_score(const std::vector<TerStats>& stats);
// "nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:VERSION"
std::string ter_signature(const TerOptions& o, int nrefs, std::string_view version);

}  // namespace tfm::eval
