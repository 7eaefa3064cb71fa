// tfm-decode: translate with a checkpoint, by beam search (or greedy search),
// on the CPU or a GPU, as a filter.
//
//   cat src.txt | tfm-tok -m model.bin | tfm-decode -m model.bin --detok
//   tfm-decode -m model.bin --beam 4 --alpha 0.6 test.pieces > test.hyp.pieces
//   tfm-decode -m model.bin --n-best 4 --scores --json --attention < test.pieces
//   tfm-decode -m reverse.bin --sampling --sampling-topk 10 --seed 7 mono.pieces   # back-translation
//   tfm-decode -m model.bin --constraints --prefix test.prefix test.pieces-tab-phrases
//
// A sentence's output does not depend on the batch it is decoded in: on the
// CPU the n-best lists and scores are bit-identical at any --batch-size or
// --max-tokens (libcore/decode/incremental.h says how).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "libcore/app/app.h"
#include "libcore/base/log.h"
#include "libcore/base/precision.h"
#include "libcore/base/progress.h"
#include "libcore/decode/shortlist.h"
#include "libcore/decode/translate.h"
#include "libcore/model/model_file.h"

namespace {

struct Options {
  tfm::CommonOptions common;
  std::vector<std::string> models;  // several: an ensemble
  std::vector<double> weights;      // one a model (default: 1 each)
  std::string device = "auto", precision = "auto";
  std::string length_penalty = "gnmt", early_stopping = "bound", thread_work = "auto", shortlist;
  std::vector<std::string> files;
  tfm::TranslateOptions translate;
  bool attention = false;
  int attention_layer = 0;  // 1-based; 0: the last
  std::string alignment;    // pieces or words ("": none)
  int alignment_layer = 0;  // 1-based; 0: the last
};

void decode(Options& o) {
  const tfm::Device device = tfm::select_device(tfm::parse_device(o.device));
  const tfm::Precision precision =
      tfm::kDecodePrecision.resolve(tfm::kDecodePrecision.parse("--precision", o.precision), device);
  std::vector<std::unique_ptr<tfm::ModelFile>> files;
  std::vector<std::unique_ptr<tfm::ModelWeights>> weights;
  std::vector<const tfm::ModelWeights*> models;
  for (const std::string& path : o.models) {
    const tfm::ModelFile& file = *files.emplace_back(std::make_unique<tfm::ModelFile>(path));
    // An ensemble reads one vocabulary: every model's tokenizer the first's.
    const tfm::Vocab *first = files.front()->vocab(), *vocab = file.vocab();
    if ((first == nullptr) != (vocab == nullptr) || (first && first->fingerprint() != vocab->fingerprint()))
      tfm::fail("{} and {} have other vocabularies ({} and {}): an ensemble's models must share theirs",
                o.models.front(), path, first ? first->fingerprint() : "none", vocab ? vocab->fingerprint() : "none");
    models.push_back(weights.emplace_back(file.load_weights(device, precision)).get());
    // On the CPU (f32, int8): the decoder's GEMMs read their weights' panels.
    weights.back()->pack_weights();
  }
  const tfm::ModelWeights* model = models.front();
  const tfm::ModelFile& file = *files.front();
  tfm::TranslateOptions& t = o.translate;
  // The one decoder layer whose attention is kept: --attention's, --alignment's.
  const int64_t layers = model->config().decoder_layers;
  for (const auto& [on, layer, name] : {std::tuple{o.attention, o.attention_layer, "--attention-layer"},
                                        std::tuple{!o.alignment.empty(), o.alignment_layer, "--alignment-layer"}}) {
    if (!on) continue;
    if (layer > layers)
      throw tfm::UsageError(fmt::format("{} {} is past the model's {} decoder layers", name, layer, layers));
    t.search.attention_layer = static_cast<int>(layer > 0 ? layer - 1 : layers - 1);
  }
  if (t.alignment_heads > model->config().heads)
    throw tfm::UsageError(fmt::format("--alignment-heads {} is more than the model's {} heads", t.alignment_heads,
                                      model->config().heads));
  t.thread_work = tfm::parse_thread_work(o.thread_work);
  std::optional<tfm::Shortlist> shortlist;
  if (!o.shortlist.empty()) {
    if (!file.vocab())
      throw tfm::Error("--shortlist maps pieces through the checkpoint's tokenizer, and " + o.models.front() + " has none");
    shortlist.emplace(tfm::Shortlist::load(o.shortlist, *file.vocab(), model->config().vocab_size));
    t.shortlist = &*shortlist;
  }
  tfm::Progress progress(o.common.quiet);
  t.progress = &progress;
  std::vector<double> mix = o.weights;
  if (mix.empty()) mix.assign(models.size(), 1.0);
  if (mix.size() != models.size())
    throw tfm::UsageError(fmt::format("--weights gives {} weights for {} models", mix.size(), models.size()));
  tfm::Translator translator(models, mix, file.vocab(), t);
  for (size_t m = 0; m < models.size(); ++m)
    tfm::log::info("{} on {}: model {}", o.models[m], device.str(), models[m]->memory_report());
  tfm::log::info("decoder {}", translator.memory_report());
  const tfm::TranslateTotals n = translator.run(o.files, stdout);
  tfm::log::info("{} sentences, {} tokens in {:.1f} s: {:.1f} tokens/s", n.sentences, n.tokens,
                 n.seconds, n.seconds > 0 ? static_cast<double>(n.tokens) / n.seconds : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  tfm::prefer_sleeping_threads(argv);
  Options o;
  tfm::TranslateOptions& t = o.translate;
  CLI::App app{
      "Translate source sentences with a tfm checkpoint: pieces (or ids) in, one sentence a\n"
      "line, translations out in the same order. FILE... or stdin to stdout."};
  tfm::add_common_options(app, o.common);
  tfm::add_config_option(app, "Read options from an INI or TOML file (KEY = VALUE, long names)");
  app.add_option("-m,--model", o.models,
                 "The checkpoint (default: $TFM_MODEL); several (-m a.bin -m b.bin): an ensemble")
      ->allow_extra_args(false);
  app.add_option("--weights", o.weights,
                 "With several -m: each model's weight in the ensemble's mix (default 1 each)")
      ->delimiter(',')->allow_extra_args(false)->check(tfm::Range(0.0, 1e6));
  app.add_option("FILE", o.files, "Input files, plain or gzip (default or '-': stdin)");
  app.add_flag("--ids", t.ids, "Read and write ids instead of pieces");
  app.add_flag("--detok", t.detok, "Write text, decoded by the checkpoint's SentencePiece model");
  auto* search = "Search";
  auto* beam = app.add_option("-b,--beam", t.search.beam_size, "Beam size; 1 is greedy search")
      ->default_val(4)->check(tfm::Range(int64_t{1}, int64_t{1} << 20))->group(search);
  app.add_option("--alpha", t.search.alpha, "Length penalty exponent (0: none)")
      ->default_val(0.6)->check(tfm::Range(0.0, 1e6))->group(search);
  app.add_option("--length-penalty", o.length_penalty,
                 "gnmt: ((5 + |Y|) / 6)^alpha (the paper's); plain: |Y|^alpha")
      ->default_val("gnmt")->check(CLI::IsMember({"gnmt", "plain"}))->group(search);
  app.add_option("--max-len-a", t.max_len_a, "Output tokens at most a * |source| + b")
      ->default_val(1.0)->check(tfm::Range(0.0, 1e6))->group(search);
  app.add_option("--max-len-b", t.max_len_b, "Output tokens at most a * |source| + b")
      ->default_val(50.0)->check(tfm::Range(0.0, 1e6))->group(search);
  app.add_option("--early-stopping", o.early_stopping,
                 "bound: stop once no hypothesis can still enter the n-best (exact); beam: once "
                 "--beam hypotheses have ended; never")
      ->default_val("bound")->check(CLI::IsMember({"bound", "beam", "never"}))->group(search);
  app.add_option("--prefix", t.prefix_file,
                 "A target prefix a line (pieces or ids, as the input; empty: none) that every hypothesis of "
                 "the input's same line starts with, forced and scored")
      ->group(search);
  app.add_flag("--constraints", t.constraints,
               "Read SOURCE<TAB>PHRASE<TAB>PHRASE... lines: every output contains every PHRASE (hard "
               "lexical constraints, by dynamic beam allocation)")
      ->group(search);
  auto* shortlist = app.add_option("--shortlist", o.shortlist,
                 "Score each sentence over its candidate target pieces only (a vocabulary shortlist: "
                 "tfm-tok shortlist builds one); log-probabilities normalized over them")
      ->group(search);
  auto* sampling = "Sampling";
  app.add_flag("--sampling", t.search.sampling.on,
               "Draw -n samples a sentence from the model instead of searching (back-translation)")
      ->group(sampling);
  auto* topk = app.add_option("--sampling-topk", t.search.sampling.top_k,
                              "With --sampling: draw among the K most likely tokens (0: all)")
                   ->default_val(0)->check(tfm::Range(int64_t{0}, int64_t{1} << 30))->group(sampling);
  auto* topp = app.add_option("--sampling-topp", t.search.sampling.top_p,
                              "With --sampling: then among the fewest most likely whose probability reaches P, "
                              "0 < P <= 1 (nucleus)")
                   ->default_val(1.0)->group(sampling);
  auto* temperature = app.add_option("--temperature", t.search.sampling.temperature,
                                     "With --sampling: log-probabilities divided by T before the draw (> 0)")
                          ->default_val(1.0)->group(sampling);
  auto* seed = app.add_option("--seed", t.search.sampling.seed,
                              "With --sampling: the draws' seed; a line's samples depend on it and the line alone")
                   ->default_val(1)->group(sampling);
  auto* output = "Output";
  app.add_option("-n,--n-best", t.search.n_best,
                 "Hypotheses per sentence, best first (<= --beam); with --sampling, the samples")
      ->default_val(1)->check(tfm::Range(int64_t{1}, int64_t{1} << 20))->group(output);
  app.add_flag("--scores", t.scores, "Write each hypothesis's score before it (SCORE<TAB>)")->group(output);
  app.add_flag("--json", t.json, "One JSON object a line: tokens, scores, log-probabilities")->group(output);
  app.add_flag("--attention", o.attention,
               "With --json: cross-attention weights of the last layer, mean over heads")
      ->group(output);
  app.add_option("--attention-layer", o.attention_layer, "With --attention: this layer (1-based)")
      ->check(tfm::AtLeast(1))->group(output);
  app.add_option("--alignment", o.alignment,
                 "After each hypothesis, ' ||| i-j ...': each target piece's most attended source piece "
                 "(pieces), or those links merged to words")
      ->check(CLI::IsMember({"pieces", "words"}))->group(output);
  app.add_option("--alignment-layer", o.alignment_layer, "With --alignment: this decoder layer (1-based; "
                 "default the last)")
      ->check(tfm::AtLeast(1))->group(output);
  app.add_option("--alignment-heads", t.alignment_heads,
                 "With --alignment: the mean of the first N heads (default all)")
      ->check(tfm::AtLeast(int64_t{1}))->group(output);
  app.add_flag("--attention-heads", t.search.attention_heads,
               "With --attention: every head instead of their mean")->group(output);
  auto* batching = "Batching and limits";
  app.add_option("--max-tokens", t.max_tokens, "Source tokens of a batch, padding counted")
      ->default_val(8192)->check(tfm::Range(int64_t{1}, int64_t{1} << 30))->group(batching);
  app.add_option("--batch-size", t.batch_size,
                 "Sentences of a batch (0: 32 on the CPU, 256 on a GPU); 1 answers each line at once")
      ->default_val(0)->check(tfm::Range(int64_t{0}, int64_t{1} << 20))->group(batching);
  app.add_option("--max-input-len", t.max_input_len, "Longer lines are an error (FILE:LINE)")
      ->default_val(1024)->check(tfm::Range(int64_t{1}, int64_t{1} << 20))->group(batching);
  app.add_flag("--truncate", t.truncate, "Cut longer lines to --max-input-len, with a warning")
      ->group(batching);
  app.add_option("--threads-take", o.thread_work,
                 "On the CPU: batches (each thread its own batches, a decoder each), rows (each batch "
                 "split between the threads) or auto (batches where every thread has one, or for small models)")
      ->default_val("auto")->check(CLI::IsMember({"auto", "batches", "rows"}))->group(batching);
  tfm::add_device_option(app, o.device);
  app.add_option("--precision", o.precision,
                 "auto (bf16 on a GPU, fp32 on the CPU), fp32, int8 on the CPU (8-bit weights), or "
                 "bf16 / fp16 on a GPU")
      ->default_val("auto")->check(CLI::IsMember(tfm::kDecodePrecision.names()));

  app.callback([&] {
    if (o.models.empty()) o.models.push_back(tfm::model_or_environment(""));
    if (!o.weights.empty() && o.weights.size() != o.models.size())
      throw CLI::ValidationError(fmt::format("--weights gives {} weights for {} models", o.weights.size(),
                                             o.models.size()));
    if (shortlist->count() > 0 && o.shortlist.empty()) throw CLI::ValidationError("--shortlist needs a file");
    if (!o.shortlist.empty() && o.models.size() > 1)
      throw CLI::ValidationError("--shortlist decodes with one model: an ensemble's logits span the vocabulary");
    tfm::SamplingOptions& p = t.search.sampling;
    if (!p.on) {
      for (const CLI::Option* opt : {topk, topp, temperature, seed})
        if (opt->count() > 0) throw CLI::ValidationError(fmt::format("{} goes with --sampling", opt->get_name()));
    } else {
      if (beam->count() > 0)
        throw CLI::ValidationError("--beam and --sampling: each sample is drawn alone; -n N asks for N");
      if (!(p.top_p > 0 && p.top_p <= 1))
        throw CLI::ValidationError(fmt::format("--sampling-topp must be in (0, 1], not {}", p.top_p));
      if (!(p.temperature > 0 && std::isfinite(p.temperature)))
        throw CLI::ValidationError(fmt::format("--temperature must be > 0, not {}", p.temperature));
      if (t.constraints) throw CLI::ValidationError("--constraints goes with the search, not --sampling");
      t.search.beam_size = t.search.n_best;  // a row a sample
    }
    const bool stdin_input = o.files.empty() || std::find(o.files.begin(), o.files.end(), "-") != o.files.end();
    if (t.prefix_file == "-" && stdin_input)
      throw CLI::ValidationError("--prefix - and the input cannot both be stdin");
    if (t.search.n_best > t.search.beam_size)
      throw CLI::ValidationError(fmt::format("--n-best {} is more than --beam {}", t.search.n_best,
                                             t.search.beam_size));
    const bool attention_detail = o.attention_layer > 0 || t.search.attention_heads;
    if (attention_detail && !o.attention)
      throw CLI::ValidationError("--attention-layer and --attention-heads go with --attention");
    if (o.attention && !t.json) throw CLI::ValidationError("--attention goes with --json");
    if (o.alignment.empty() && (o.alignment_layer > 0 || t.alignment_heads > 0))
      throw CLI::ValidationError("--alignment-layer and --alignment-heads go with --alignment");
    if (!o.alignment.empty() && o.attention && o.alignment_layer != o.attention_layer)
      throw CLI::ValidationError("--attention and --alignment read one layer: give both the same layer");
    if (!o.alignment.empty() && o.attention && t.alignment_heads > 0 && !t.search.attention_heads)
      throw CLI::ValidationError("--alignment-heads keeps every head: with --attention, add --attention-heads");
    t.alignment = o.alignment == "pieces" ? tfm::Alignment::pieces
                  : o.alignment == "words" ? tfm::Alignment::words
                                           : tfm::Alignment::none;
    t.json_attention = o.attention;
    if (t.alignment_heads > 0) t.search.attention_heads = true;
    if (t.scores && t.json) throw CLI::ValidationError("--json has the scores already; drop --scores");
    t.search.length_penalty = tfm::parse_length_penalty(o.length_penalty);
    t.search.early_stopping = tfm::parse_early_stopping(o.early_stopping);
  });
  return tfm::run_program("tfm-decode", app, argc, argv, o.common, [&] { decode(o); });
}
