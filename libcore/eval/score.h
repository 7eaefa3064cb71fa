// What tfm-score computes and prints: the chosen metrics over a corpus of
// hypotheses and references, as sacreBLEU's command line reports them
// ("BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:tfm-0.1.0 =
// 22.6 56.4/28.1/16.0/9.5 (BP = ...)"), one score per line with -b, or JSON.
// Parse trees are scored the same way, EVALB's two summaries on two lines
// ("PARSEVAL|evalb:collins|len:all|tags:none|version:tfm-0.1.0 = 85.31
// (P = 86.01 R = 84.62 CM = 25.42 TA = n/a sent = 245 error = 0 skip = 0)").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "libcore/eval/bleu.h"
#include "libcore/eval/chrf.h"
#include "libcore/eval/parseval.h"
#include "libcore/eval/ter.h"

namespace tfm::eval {

// parseval scores trees (parseval.h) and goes alone: BLEU on trees means nothing.
enum class Metric { bleu, chrf, ter, parseval };
const char* metric_name(Metric m);              // "bleu", "chrf", "ter", "parseval"
Metric parse_metric(std::string_view name);     // throws Error naming the known ones

struct ScoreOptions {
  std::vector<Metric> metrics{Metric::bleu};  // reported in sacreBLEU's order: BLEU, chrF, TER
  BleuOptions bleu;
  ChrfOptions chrf;
  TerOptions ter;
  ParsevalOptions parseval;
  bool paper_bleu = false;      // also the paper's BLEU (paper_bleu.h)
  bool sentence_level = false;  // one score per segment (one metric)
};

// Hypotheses and references, line i of each file one segment; each line as
// sacreBLEU's command line keeps it (trailing whitespace removed).
struct Corpus {
  std::vector<std::string> hyps;
  std::vector<std::vector<std::string>> refs;  // refs[r][i]
};

// Reads the hypotheses ("-": stdin) and every reference file, plain or gzip.
// Throws Error for an unreadable file, invalid UTF-8 (FILE:LINE), an empty
// hypothesis file, or a line count that differs between the hypotheses and a
// reference (naming both files and both counts). With `trees` (parseval:
// the hypotheses are EVALB's test file, the one reference its gold file),
// blank lines past the last gold tree are dropped with a warning, as EVALB
// warns and scores such a file.
Corpus read_corpus(const std::string& hyp_path, const std::vector<std::string>& ref_paths,
                   bool trees = false);

// One reported score.
struct Result {
  std::string name;       // "BLEU", "chrF2++", "TER", "BLEU-paper", "PARSEVAL"
  std::string signature;  // "nrefs:1|case:mixed|..."
  double score = 0;
  std::string details;    // BLEU's precisions and brevity penalty, PARSEVAL's P, R ..., else empty
  std::optional<BleuScore> bleu;
  std::optional<ParsevalCounts> parseval;  // and whether tagging accuracy was measured:
  bool parseval_tagged = true;
};

// Corpus-level scores, in sacreBLEU's order, the paper's BLEU after BLEU;
// for parseval (one reference file, the gold trees) EVALB's "All" and
// "len<=40" summaries, a warning on stderr for each error sentence (the
// first 10, then their number).
std::vector<Result> score_corpus(const Corpus& c, const ScoreOptions& o);
// Segment-level scores of the one metric in o.metrics (BLEU with the effective order).
std::vector<Result> score_segments(const Corpus& c, const ScoreOptions& o);

struct FormatOptions {
  int width = 1;            // decimals of the score
  bool score_only = false;  // the numbers alone, one a line
  bool json = false;
};
// sacreBLEU's text lines (several aligned on '='), or the numbers, or JSON
// (an object, or an array of them for several scores). Ends with '\n'.
std::string format_corpus(const std::vector<Result>& results, const FormatOptions& f);
// One line per result: the text line, the number or a JSON object.
std::string format_segments(const std::vector<Result>& results, const FormatOptions& f);

// The version in every signature: "tfm-0.1.0".
std::string signature_version();

}  // namespace tfm::eval
