// BLEU exactly as sacreBLEU 2.x computes it (metrics/bleu.py): the same
// preprocessing (lowercase, rstrip, tokenizer), clipped n-gram counts against
// the per-n-gram maximum over references, the closest reference length (the
// shorter on ties), smoothing none / floor / add-k / exp and, for sentence
// BLEU, the effective order. Every float operation is done in the order
// Python does it, so scores agree to the last bit.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/eval/tokenize.h"

namespace tfm::eval {

enum class Smoothing { none, floor, add_k, exp };

const char* smoothing_name(Smoothing s);  // "none", "floor", "add-k", "exp"
Smoothing parse_smoothing(std::string_view name);  // throws Error naming the known ones
// sacreBLEU's SMOOTH_DEFAULTS: floor 0.1, add-k 1; none and exp take none.
std::optional<double> default_smooth_value(Smoothing s);

struct BleuOptions {
  Tokenizer tokenize = Tokenizer::t13a;
  bool lowercase = false;
  Smoothing smooth = Smoothing::exp;
  std::optional<double> smooth_value;  // unset: the method's default
  int max_order = 4;
  bool effective_order = false;  // sentence BLEU: average only the orders with n-grams
};

// Sufficient statistics of a segment, or summed over a corpus.
struct BleuStats {
  int64_t sys_len = 0, ref_len = 0;
  std::vector<int64_t> correct, total;  // per order 1..max_order

  explicit BleuStats(int max_order = 4) : correct(max_order, 0), total(max_order, 0) {}
  BleuStats& operator+=(const BleuStats& o);
};

struct BleuScore {
  double score = 0;  // 0..100
  std::vector<double> counts, totals;  // after add-k smoothing, as sacreBLEU reports them
  std::vector<double> precisions;      // per order, in percent
  double bp = 0, ratio = 0;
  int64_t sys_len = 0, ref_len = 0;
};

// sacreBLEU's BLEU._preprocess_segment: lowercase, rstrip, tokenize.
std::string bleu_preprocess(std::string_view line, const BleuOptions& o);

// Statistics of one segment whose hypothesis and references are already
// preprocessed; words are split on whitespace.
BleuStats bleu_segment_stats(std::string_view hyp, std::span<const std::string> refs, int max_order);

// Statistics of each segment: hyps[i] against refs[r][i] for every r.
// Runs on every core; the result does not depend on how many.
std::vector<BleuStats> bleu_corpus_stats(const std::vector<std::string>& hyps,
                                         const std::vector<std::vector<std::string>>& refs,
                                         const BleuOptions& o);

// BLEU.compute_bleu: the score from (summed) statistics.
BleuScore compute_bleu(const BleuStats& stats, const BleuOptions& o);

// "56.4/28.1/16.0/9.5 (BP = 1.000 ratio = 1.013 hyp_len = 62 ref_len = 61)"
std::string bleu_details(const BleuScore& s);
// "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:VERSION"
std::string bleu_signature(const BleuOptions& o, int nrefs, std::string_view version);

// The per-segment loop of every metric: f(i) for each segment, on every
// core, in chunks; exceptions are rethrown in the caller.
void for_each_segment(size_t segments, const std::function<void(size_t)>& f);

}  // namespace tfm::eval
