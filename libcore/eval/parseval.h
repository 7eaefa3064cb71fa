// Labeled bracketing scores of parse trees against gold trees, as EVALB
// (Sekine and Collins 1997, the 2006 version parsing papers run) computes
// them with its COLLINS.prm:
//
//   LABELED 1, CUTOFF_LEN 40, EQ_LABEL ADVP PRT,
//   DELETE_LABEL TOP -NONE- , : `` '' .    DELETE_LABEL_FOR_LENGTH -NONE-
//
// One tree a line on each side, line i against line i. For each sentence,
// as EVALB's read_line and calc_result do:
//   - a leaf whose POS tag is a DELETE_LABEL (punctuation, -NONE-) is
//     removed, word and all; the remaining leaves are the sentence's words;
//   - every constituent above the POS level is a bracket (label, first
//     word, one past the last word) over the remaining words; brackets
//     covering no word, and those whose label (cut at its first '-' or
//     '=') is a DELETE_LABEL (TOP: the root), do not count;
//   - a test bracket matches a gold bracket of the same span and label
//     (ADVP and PRT being one label), each bracket matching at most once;
//   - crossing: test brackets that overlap a gold bracket without nesting;
//   - tagging: words whose test POS tag equals the gold one;
//   - the length that decides "<= 40" counts every gold leaf but -NONE-
//     (punctuation included).
// A sentence is an error (EVALB's "Error sentence": counted, reported,
// left out of every total) when either tree is malformed (tree.h's
// grammar), when the two have different numbers of words ("length
// mismatch") or different words ("words mismatch"); it is skipped
// ("Skip sentence") when the test tree has no word (a blank line, "(TOP )",
// "(TOP (. .))" once punctuation is removed), which EVALB checks first, so
// a test line without a word is skipped even when it or its gold tree is
// malformed. EVALB gives up once
// more than 10 sentences are in error (MAX_ERROR 10); here every sentence
// is scored.
//
// Hypotheses without POS tags, as parsing-as-translation outputs them
// (every tag XX, linearize.h), are scored as EVALB scores them with the
// gold tags put in: each test word takes the POS tag of the gold word at
// its position (so punctuation is removed from both sides alike), and the
// tagging accuracy is not measured (the tags would be the gold's).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tfm::eval {

struct ParsevalOptions {
  int64_t cutoff_len = 40;  // COLLINS.prm's CUTOFF_LEN: the second summary
  // Whether the test trees carry POS tags. Unset: they do, unless every
  // leaf of every test tree is tagged XX.
  std::optional<bool> tagged;
};

enum class ParsevalStatus { ok, error, skip };

// One sentence, as EVALB's per-sentence line reports it.
struct SentenceParseval {
  ParsevalStatus status = ParsevalStatus::ok;
  std::string error;        // why it is an error sentence
  int64_t length = 0;       // gold leaves but -NONE- (decides <= cutoff)
  int64_t gold_brackets = 0, test_brackets = 0, matched = 0;
  int64_t crossing = 0;     // test brackets crossing a gold bracket
  int64_t words = 0;        // words after the deletions
  int64_t correct_tags = 0;
};

// The totals of one of EVALB's summaries ("-- All --", "-- len<=40 --").
struct ParsevalCounts {
  int64_t sentences = 0, errors = 0, skipped = 0;
  int64_t gold_brackets = 0, test_brackets = 0, matched = 0;
  int64_t complete = 0;     // valid sentences with every bracket matched both ways
  int64_t crossing = 0, no_crossing = 0, two_or_less_crossing = 0;
  int64_t words = 0, correct_tags = 0;

  void add(const SentenceParseval& s);
  int64_t valid() const { return sentences - errors - skipped; }
  // Percentages as EVALB prints them (0 where the denominator is 0; F1 is
  // 0 where precision and recall are, which EVALB prints as nan).
  double recall() const;
  double precision() const;
  double f1() const;
  double complete_match() const;
  double average_crossing() const;  // per valid sentence, not a percentage
  double no_crossing_rate() const;
  double two_or_less_crossing_rate() const;
  double tagging_accuracy() const;
};

struct ParsevalResult {
  ParsevalCounts all;       // every sentence
  ParsevalCounts within_cutoff;  // those of length <= cutoff_len
  int64_t cutoff_len = 40;
  bool tagged = true;       // false: tagging accuracy not measured
  std::vector<std::pair<int64_t, std::string>> errors;  // 1-based line, why
};

// One sentence; `tagged`: whether the test tree's tags are its own (false:
// the gold's are put in, as above).
SentenceParseval parseval_sentence(std::string_view gold, std::string_view test, bool tagged = true);

// Every sentence, gold[i] against test[i]; throws Error when the two
// differ in length.
ParsevalResult parseval(const std::vector<std::string>& gold, const std::vector<std::string>& test,
                        const ParsevalOptions& options = {});

}  // namespace tfm::eval
