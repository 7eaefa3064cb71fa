// tfm-score: text metrics of hypotheses against references, identical to
// sacreBLEU 2.x (BLEU, sentence BLEU, chrF, chrF++, TER), and the paper's
// tokenized BLEU beside them.
//
//   tfm-score -r ref.de < hyp.de                  BLEU, 13a, exp smoothing
//   tfm-score -r ref.de -i hyp.de --metrics bleu chrf ter -w 2
//   tfm-score -r ref1 ref2 -i hyp -tok intl -lc --json
//   tfm-score -r ref.de -i hyp.de --paper-bleu    + tokenizer.perl -l de, ##AT##, multi-bleu
//   tfm-score -r gold.trees -i test.trees --metrics parseval    EVALB, COLLINS.prm
//
// With a model, forced-decoding scores of target pieces given source pieces:
//   tfm-score -m model.bin src.pieces tgt.pieces          corpus perplexity
//   tfm-score -m model.bin --src s --tgt nbest -sl -b     one log-probability a line
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "libcore/app/app.h"
#include "libcore/base/progress.h"
#include "libcore/eval/model_score.h"
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
  // -m: model scores
  std::string model, device, precision = "fp32";
  std::vector<std::string> files;
  tfm::eval::ModelScoreOptions scoring;
};

// Options of the text metrics, and of model scoring: each is a usage error
// in the other mode rather than silently ignored.
const char* const kMetricOptions[] = {
    "--references", "--input", "--metrics", "--tokenize", "--lowercase", "--smooth-method",
    "--smooth-value", "--chrf-char-order", "--chrf-word-order", "--chrf-beta", "--chrf-whitespace",
    "--chrf-lowercase", "--chrf-eps-smoothing", "--ter-case-sensitive", "--ter-normalized",
    "--ter-no-punct", "--paper-bleu"};
const char* const kModelOptions[] = {"--src", "--tgt", "--ids", "--device", "--precision", "--max-tokens",
                                     "FILES"};

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
      "one segment a line; every reference file has as many lines.\n"
      "Or parse trees against gold trees, one a line, as EVALB with COLLINS.prm scores\n"
      "them (--metrics parseval): F1, precision, recall, complete match, tagging accuracy.\n"
      "Or, with -m MODEL, score target pieces given source pieces with a model (forced\n"
      "decoding): corpus perplexity, or per sentence its log-probability and its tokens'."};
  tfm::add_common_options(app, o.common);
  app.add_option("-r,--references", o.references, "Reference files, one or more (plain or gzip)")
      ->expected(1, -1);
  app.add_option("-i,--input", o.input, "Hypotheses (default or '-': stdin)");
  app.add_option("--metrics", o.metrics, "Metrics: bleu chrf ter, or parseval alone (default bleu)")
      ->expected(1, -1)->check(parsed_by(ev::parse_metric, "METRIC"));
  app.add_option("--tokenize", o.tokenize, "BLEU tokenizer (-tok): 13a, intl, none, char (default 13a)")
      ->check(parsed_by(ev::parse_tokenizer, "TOKENIZER"));
  app.add_flag("--lowercase", o.score.bleu.lowercase, "Lowercased BLEU (-lc)");
  app.add_option("-s,--smooth-method", o.smooth, "BLEU smoothing: exp, floor, add-k, none (default exp)")
      ->check(parsed_by(ev::parse_smoothing, "METHOD"));
  app.add_option("--smooth-value", o.smooth_value,
                 "Value for floor (default 0.1) and add-k (default 1) (-sv)")
      ->check(tfm::Range(0.0, 1e9));
  app.add_flag("--sentence-level", o.score.sentence_level, "One score per segment (-sl; one metric)");
  app.add_option("--chrf-char-order", o.score.chrf.char_order, "chrF character n-gram order (default 6)")
      ->check(tfm::Range(1, 1000));
  app.add_option("--chrf-word-order", o.score.chrf.word_order, "chrF word n-gram order; 2 is chrF++ (default 0)")
      ->check(tfm::Range(0, 1000));
  app.add_option("--chrf-beta", o.score.chrf.beta, "chrF: weight of recall over precision (default 2)")
      ->check(tfm::Range(0, 1000));
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
  app.add_option("-w,--width", o.format.width,
                 "Decimals of the scores (default 1, parseval 2; the last one counts)")
      ->check(tfm::Range(0, 17))->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_flag("--json", o.format.json, "Print JSON: one object per score (an array for several)");
  app.add_option("-m,--model", o.model, "Score with this checkpoint (forced decoding) instead of references");
  app.add_option("--src", o.scoring.src, "-m: source pieces, one sentence a line ('-': stdin)");
  app.add_option("--tgt", o.scoring.tgt, "-m: target pieces to score, as many lines ('-': stdin)");
  app.add_option("FILES", o.files, "-m: SRC TGT, instead of --src and --tgt")->expected(0, 2);
  app.add_flag("--ids", o.scoring.ids, "-m: token ids instead of pieces");
  app.add_option("--max-tokens", o.scoring.max_tokens,
                 "-m: padded tokens a side of a batch (default 2048)")
      ->check(tfm::AtLeast(int64_t{1}));
  tfm::add_device_option(app, o.device);
  app.add_option("--precision", o.precision, "-m: fp32 (default), or int8 on the CPU (8-bit weights)")
      ->default_val("fp32")->check(CLI::IsMember(tfm::kScorePrecision.names()));

  app.callback([&] {
    const bool model = !o.model.empty();
    for (const char* name : model ? std::span<const char* const>(kMetricOptions)
                                  : std::span<const char* const>(kModelOptions))
      if (app.count(name) > 0)
        throw CLI::ValidationError(name, model ? "is for text metrics, not with -m"
                                               : "scores with a model: give -m MODEL");
    if (model) {
      if (o.files.size() == 2 && (app.count("--src") || app.count("--tgt")))
        throw CLI::ValidationError("FILES", "give SRC TGT or --src and --tgt, not both");
      if (o.files.size() == 1) throw CLI::ValidationError("FILES", "takes both SRC and TGT");
      if (o.files.size() == 2) o.scoring.src = o.files[0], o.scoring.tgt = o.files[1];
      if (o.scoring.src == "-" && o.scoring.tgt == "-")
        throw CLI::ValidationError("--src", "and --tgt cannot both read stdin");
      if (app.count("--width") == 0) o.format.width = 4;
    } else if (o.references.empty()) {
      throw CLI::RequiredError("--references (or -m MODEL)");
    }
    if (std::find(o.metrics.begin(), o.metrics.end(), "parseval") != o.metrics.end()) {
      if (o.metrics.size() != 1) throw CLI::ValidationError("--metrics", "parseval goes alone: it scores trees");
      if (o.references.size() > 1) throw CLI::ValidationError("--references", "parseval takes one gold file");
      if (o.score.sentence_level) throw CLI::ValidationError("--sentence-level", "parseval is a corpus score");
      if (o.score.paper_bleu) throw CLI::ValidationError("--paper-bleu", "is BLEU, not for parseval");
      if (app.count("--width") == 0) o.format.width = 2;  // EVALB's
    }
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
    if (!o.model.empty()) {
      o.scoring.device = tfm::select_device(tfm::parse_device(o.device));
      o.scoring.precision = tfm::kScorePrecision.resolve(
          tfm::kScorePrecision.parse("--precision", o.precision), o.scoring.device);
      tfm::Progress progress(o.common.quiet);
      o.scoring.progress = &progress;
      const ev::ModelScores scores = ev::score_with_model(tfm::ModelFile(o.model), o.scoring);
      const std::string out = o.score.sentence_level ? ev::format_model_sentences(scores, o.format)
                                                     : ev::format_model_corpus(scores, o.format);
      std::fwrite(out.data(), 1, out.size(), stdout);
      return;
    }
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
    const bool trees = std::find(s.metrics.begin(), s.metrics.end(), ev::Metric::parseval) != s.metrics.end();
    const ev::Corpus corpus = ev::read_corpus(o.input, o.references, trees);
    const std::string out = s.sentence_level ? ev::format_segments(ev::score_segments(corpus, s), o.format)
                                             : ev::format_corpus(ev::score_corpus(corpus, s), o.format);
    std::fwrite(out.data(), 1, out.size(), stdout);
  });
}
