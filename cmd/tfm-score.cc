// tfm-score: text metrics of hypotheses against references, identical to
// sacreBLEU 2.x (BLEU, sentence BLEU, chrF, chrF++, TER), and the paper's
// tokenized BLEU beside them.
//
//   tfm-score -r ref.de < hyp.de                  BLEU, 13a, exp smoothing
//   tfm-score -r ref.de -i hyp.de --metrics bleu chrf ter -w 2
//   tfm-score -r ref1 ref2 -i hyp -tok intl -lc --json
//   tfm-score -r ref.de -i hyp.de --paper-bleu    + tokenizer.perl -l de, ##AT##, multi-bleu
//
// -m stays free for a model (forced-decoding scores, a later issue).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "libcore/app.h"
#include "libcore/eval/score.h"

namespace {

struct Options {
  tfm::CommonOptions common;
  std::string input = "-";
  std::vector<std::string> references;
  std::vector<std::string> metrics{"bleu"};
  std::string tokenize = "13a", smooth = "exp";
  std::optional<double> smooth_value;
  tfm::eval::ScoreOptions score;
  tfm::eval::FormatOptions format;
};

// sacreBLEU's multi-letter short options, spelled as CLI11 wants them.
const std::pair<const char*, const char*> kAliases[] = {
    {"-tok", "--tokenize"}, {"-lc", "--lowercase"}, {"-sv", "--smooth-value"}, {"-sl", "--sentence-level"}};

// A CLI11 check from a libcore parser that throws tfm::Error.
template <typename Parse>
CLI::Validator parsed_by(Parse parse, const std::string& what) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        try {
          parse(text);
          return {};
        } catch (const std::exception& e) {
          return e.what();
        }
      },
      what);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::vector<char*> args(argv, argv + argc);
  for (char*& a : args)
    for (const auto& [alias, option] : kAliases)
      if (std::strcmp(a, alias) == 0) a = const_cast<char*>(option);

  namespace ev = tfm::eval;
  CLI::App app{
      "Score hypotheses against references: BLEU, chrF and TER exactly as sacreBLEU 2.x\n"
      "computes them, and the paper's tokenized BLEU. Hypotheses from -i FILE or stdin,\n"
      "one segment a line; every reference file has as many lines."};
  tfm::add_common_options(app, o.common);
  app.add_option("-r,--references", o.references, "Reference files, one or more (plain or gzip)")
      ->required()->expected(1, -1);
  app.add_option("-i,--input", o.input, "Hypotheses (default or '-': stdin)");
  app.add_option("--metrics", o.metrics, "Metrics: bleu chrf ter (default bleu)")
      ->expected(1, -1)->check(parsed_by(ev::parse_metric, "METRIC"));
  app.add_option("--tokenize", o.tokenize, "BLEU tokenizer (-tok): 13a, intl, none, char (default 13a)")
      ->check(parsed_by(ev::parse_tokenizer, "TOKENIZER"));
  app.add_flag("--lowercase", o.score.bleu.lowercase, "Lowercased BLEU (-lc)");
  app.add_option("-s,--smooth-method", o.smooth, "BLEU smoothing: exp, floor, add-k, none (default exp)")
      ->check(parsed_by(ev::parse_smoothing, "METHOD"));
  app.add_option("--smooth-value", o.smooth_value,
                 "Value for floor (default 0.1) and add-k (default 1) (-sv)");
  app.add_flag("--sentence-level", o.score.sentence_level, "One score per segment (-sl; one metric)");
  app.add_option("--chrf-char-order", o.score.chrf.char_order, "chrF character n-gram order (default 6)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--chrf-word-order", o.score.chrf.word_order, "chrF word n-gram order; 2 is chrF++ (default 0)")
      ->check(CLI::Range(0, 1000));
  app.add_option("--chrf-beta", o.score.chrf.beta, "chrF: weight of recall over precision (default 2)")
      ->check(CLI::Range(0, 1000));
  app.add_flag("--chrf-whitespace", o.score.chrf.whitespace, "chrF: keep whitespace in character n-grams");
  app.add_flag("--chrf-lowercase", o.score.chrf.lowercase, "Lowercased chrF");
  app.add_flag("--chrf-eps-smoothing", o.score.chrf.eps_smoothing,
               "chrF: chrF++.py's eps smoothing instead of the effective order");
  app.add_flag("--ter-case-sensitive", o.score.ter.case_sensitive, "TER: keep case (default: lowercase)");
  app.add_flag("--ter-normalized", o.score.ter.normalized, "TER: tercom's punctuation normalization");
  app.add_flag("--ter-no-punct", o.score.ter.no_punct, "TER: remove punctuation");
  app.add_flag("--paper-bleu", o.score.paper_bleu,
               "Also the paper's BLEU: tokenizer.perl -l de, ##AT## compounds, multi-bleu.perl");
  app.add_flag("-b,--score-only", o.format.score_only, "Print the numbers alone, one a line");
  app.add_option("-w,--width", o.format.width, "Decimals of the scores (default 1; the last one counts)")
      ->check(CLI::Range(0, 17))->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_flag("--json", o.format.json, "Print JSON: one object per score (an array for several)");

  app.callback([&] {
    if (o.smooth_value && o.smooth != "floor" && o.smooth != "add-k")
      throw CLI::ValidationError("--smooth-value", "applies to floor and add-k only");
    if (o.score.sentence_level && o.metrics.size() != 1)
      throw CLI::ValidationError("--sentence-level", "takes exactly one metric");
    if (o.score.sentence_level && o.score.paper_bleu)
      throw CLI::ValidationError("--paper-bleu", "is a corpus score, not for --sentence-level");
    if (o.format.json && o.format.score_only)
      throw CLI::ValidationError("--json", "and --score-only exclude each other");
  });

  return tfm::run_program("tfm-score", app, static_cast<int>(args.size()), args.data(), o.common, [&] {
    ev::ScoreOptions& s = o.score;
    s.metrics.clear();
    for (const std::string& m : o.metrics) {
      const ev::Metric metric = ev::parse_metric(m);
      if (std::find(s.metrics.begin(), s.metrics.end(), metric) == s.metrics.end()) s.metrics.push_back(metric);
    }
    std::sort(s.metrics.begin(), s.metrics.end());  // sacreBLEU's order: BLEU, chrF, TER
    s.bleu.tokenize = ev::parse_tokenizer(o.tokenize);
    s.bleu.smooth = ev::parse_smoothing(o.smooth);
    s.bleu.smooth_value = o.smooth_value;
    const ev::Corpus corpus = ev::read_corpus(o.input, o.references);
    const std::string out = s.sentence_level ? ev::format_segments(ev::score_segments(corpus, s), o.format)
                                             : ev::format_corpus(ev::score_corpus(corpus, s), o.format);
    std::fwrite(out.data(), 1, out.size(), stdout);
  });
}
