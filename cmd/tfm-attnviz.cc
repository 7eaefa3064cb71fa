// tfm-attnviz: a checkpoint's attention, every stack, layer and head, for
// given sentences: one self-contained HTML page, an SVG figure, or JSON.
//
//   tfm-attnviz -m model.bin "The agreement was signed." -o page.html
//   tfm-attnviz -m model.bin "..." --target "Das Abkommen ..." -o page.html   (forced)
//   tfm-tok -m model.bin < src.txt | tfm-attnviz -m model.bin --pieces - > page.html
//   tfm-attnviz -m model.bin "..." --svg --stack enc --layer 5 --heads 1,2 -o fig.svg
//   tfm-attnviz -m model.bin "..." --json | python3 plot.py
//
// The weights are the model's own: one evaluation pass of the Transformer
// over each pair (libcore/viz/attention.h).
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "libcore/app/app.h"
#include "libcore/base/log.h"
#include "libcore/io/atomic_file.h"
#include "libcore/viz/render.h"

namespace {

struct Options {
  tfm::CommonOptions common;
  std::string model, sentence, input, output = "-", device = "auto";
  bool has_sentence = false;  // SENTENCE given, if empty
  std::optional<std::string> target;
  std::string target_file, stack = "enc", mode = "paper";
  bool svg = false, json = false;
  int64_t layer = 0;  // 1-based; 0: the last
  std::vector<int64_t> heads;  // 1-based
  int64_t sentence_number = 1, max_sentences = 32;
  tfm::viz::AttentionOptions attention;
};

void write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
      tfm::fail("cannot write to stdout");
    return;
  }
  tfm::io::write_file_atomic(path, text);
}

void attnviz(Options& o) {
  namespace viz = tfm::viz;
  o.attention.device = tfm::select_device(tfm::parse_device(o.device));
  viz::AttentionModel model(tfm::ModelFile(o.model), o.attention);
  const tfm::ModelConfig& c = model.config();

  // The sentences: the argument, or lines of --input / stdin.
  viz::Lines src;
  if (o.has_sentence && o.sentence != "-") {
    src.text = {o.sentence};
    src.names = {"the SENTENCE argument"};
  } else {
    src = viz::read_lines(o.input.empty() ? "-" : o.input, o.max_sentences);
    if (src.more) tfm::log::warn("showing the first {} sentences (--max-sentences)", o.max_sentences);
    TFM_REQUIRE(!src.text.empty(), "{} holds no sentence", o.input.empty() || o.input == "-" ? "stdin" : o.input);
  }
  std::vector<std::optional<std::string>> targets(src.text.size());
  if (o.target) {
    TFM_REQUIRE(src.text.size() == 1, "--target is the target of one sentence, but there are {}; use --target-file",
                src.text.size());
    targets[0] = *o.target;
  } else if (!o.target_file.empty()) {
    const viz::Lines tgt = viz::read_lines(o.target_file, o.max_sentences);
    TFM_REQUIRE(tgt.text.size() == src.text.size(), "--target-file {} has {} lines for {} sentences",
                o.target_file, tgt.text.size(), src.text.size());
    for (size_t i = 0; i < tgt.text.size(); ++i) targets[i] = tgt.text[i];
  }

  viz::View view;
  view.stack = viz::parse_stack(o.stack);
  view.layer = o.layer > 0 ? o.layer - 1 : c.decoder_layers - 1;
  for (int64_t h : o.heads) view.heads.push_back(h - 1);
  view.mode = o.mode;
  view.sentence = o.sentence_number - 1;
  // Before any work: a layer, head or sentence that is not there.
  viz::check_view(view, c.decoder_layers, c.heads, static_cast<int64_t>(src.text.size()));

  const std::vector<viz::SentenceAttention> sentences = model.run(src.text, targets, src.names);
  std::string out;
  if (o.json) {
    for (const viz::SentenceAttention& s : sentences) out += viz::attention_json(s) + "\n";
  } else if (o.svg) {
    out = viz::attention_svg(sentences[static_cast<size_t>(view.sentence)], view);
  } else {
    out = viz::attention_page(sentences, view, o.model);
  }
  write_output(o.output, out);
  tfm::log::info("{} sentence{}, {} layers x {} heads, on {}: {} ({} bytes)", sentences.size(),
                 sentences.size() == 1 ? "" : "s", c.decoder_layers, c.heads, o.attention.device.str(),
                 o.output == "-" ? "stdout" : o.output, out.size());
}

}  // namespace

int main(int argc, char** argv) {
  tfm::prefer_sleeping_threads(argv);
  Options o;
  tfm::BeamSearchOptions& search = o.attention.search;
  CLI::App app{
      "Show a checkpoint's attention, every stack, layer and head, as the model computes it:\n"
      "one self-contained HTML page (default), an SVG figure (--svg) or the weights as JSON\n"
      "(--json). The source is SENTENCE, or lines of --input or stdin ('-'); without a\n"
      "target, beam search decodes one (as tfm-decode)."};
  tfm::add_common_options(app, o.common);
  app.add_option("-m,--model", o.model, "The checkpoint (default: $TFM_MODEL)");
  app.add_option("SENTENCE", o.sentence, "The source sentence; '-' or none: lines of stdin");
  app.add_option("-i,--input", o.input, "Source sentences, one a line (plain or gzip; '-': stdin)");
  app.add_flag("--pieces", o.attention.pieces,
               "Sources and targets are pieces (as tfm-tok writes them), not raw text");
  app.add_option("--target", o.target, "The target of the sentence, forced instead of decoded");
  app.add_option("--target-file", o.target_file, "Targets, one a line for each source line");
  app.add_option("--max-sentences", o.max_sentences, "Read at most this many lines")
      ->default_val(32)->check(tfm::Range(int64_t{1}, int64_t{1} << 20));
  auto* output = "Output";
  app.add_option("-o,--output", o.output, "Where to write (default '-': stdout)")->group(output);
  app.add_flag("--svg", o.svg, "One SVG figure: --stack, --layer, --heads of --sentence")->group(output);
  app.add_flag("--json", o.json, "The weights as JSON, one object a sentence and a line")->group(output);
  app.add_option("--stack", o.stack, "enc (encoder self), dec (decoder self) or cross (encoder-decoder)")
      ->default_val("enc")->check(CLI::IsMember({"enc", "dec", "cross"}))->group(output);
  app.add_option("--layer", o.layer, "The layer to draw, 1-based (default: the last)")
      ->check(tfm::AtLeast(int64_t{1}))->group(output);
  app.add_option("--heads", o.heads, "Heads to draw, 1-based, comma-separated (default: all)")
      ->delimiter(',')->allow_extra_args(false)->check(tfm::AtLeast(int64_t{1}))->group(output);
  app.add_option("--view", o.mode, "The page's first view: paper (lines), heatmap or grid")
      ->default_val("paper")->check(CLI::IsMember({"paper", "heatmap", "grid"}))->group(output);
  app.add_option("--sentence", o.sentence_number, "The sentence --svg draws and the page opens, 1-based")
      ->default_val(1)->check(tfm::AtLeast(int64_t{1}))->group(output);
  auto* decoding = "Decoding (sentences without a target)";
  app.add_option("-b,--beam", search.beam_size, "Beam size; 1 is greedy search")
      ->default_val(4)->check(tfm::Range(int64_t{1}, int64_t{1} << 10))->group(decoding);
  app.add_option("--alpha", search.alpha, "Length penalty exponent (0: none)")
      ->default_val(0.6)->check(tfm::Range(0.0, 1e6))->group(decoding);
  app.add_option("--max-len-a", o.attention.max_len_a, "Output tokens at most a * |source| + b")
      ->default_val(1.0)->check(tfm::Range(0.0, 1e6))->group(decoding);
  app.add_option("--max-len-b", o.attention.max_len_b, "Output tokens at most a * |source| + b")
      ->default_val(50.0)->check(tfm::Range(0.0, 1e6))->group(decoding);
  tfm::add_device_option(app, o.device);

  app.callback([&] {
    o.model = tfm::model_or_environment(o.model);
    if (o.svg && o.json) throw CLI::ValidationError("--svg and --json exclude each other");
    o.has_sentence = app.count("SENTENCE") > 0;  // '' too: an empty sentence, not stdin
    if (o.has_sentence && !o.input.empty())
      throw CLI::ValidationError("give SENTENCE or --input, not both");
    if (o.target && !o.target_file.empty())
      throw CLI::ValidationError("give --target or --target-file, not both");
    if (o.json && (app.count("--view") || app.count("--stack") || app.count("--layer") || app.count("--heads") ||
                   app.count("--sentence")))
      throw CLI::ValidationError("--json writes every stack, layer and head of every sentence: drop "
                                 "--view, --stack, --layer, --heads and --sentence");
    if (o.svg && app.count("--view")) throw CLI::ValidationError("--view is the page's; an SVG is the paper's view");
  });
  return tfm::run_program("tfm-attnviz", app, argc, argv, o.common, [&] { attnviz(o); });
}
