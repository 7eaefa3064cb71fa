// The Python module tfm._tfm: tfm's library seen from Python, each class or
// function one call into the libcore function its program calls (the
// program named in its docstring), so that both give the same results.
// Translator lives in translator.cc; this file has the rest: errors, the
// tokenizer, the text metrics, checkpoints and their averaging.
//
// Errors: every tfm::Error becomes tfm.Error (a RuntimeError) carrying the
// program's one-line message, "WHAT (WHERE)"; arguments of a wrong type are
// nanobind's TypeError.
#include "python/module.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "libcore/data/token_line.h"
#include "libcore/data/tokenize.h"
#include "libcore/data/vocab.h"
#include "libcore/eval/score.h"
#include "libcore/io/checkpoint.h"
#include "libcore/model/average.h"
#include "libcore/model/model_file.h"
#include "libcore/train/state.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace tfm::python {

std::vector<std::string> split_pieces(std::string_view line) {
  std::vector<std::string> out;
  for (std::string_view f : token_fields(line)) out.emplace_back(f);
  return out;
}

std::string join_pieces(const std::vector<std::string>& pieces) {
  std::string line;
  for (const std::string& p : pieces) {
    TFM_REQUIRE(!p.empty() && p.find_first_of(" \t\n\r") == std::string::npos,
                "a piece is empty or holds whitespace: '{}'", printable(p));
    if (!line.empty()) line += ' ';
    line += p;
  }
  return line;
}

void check_line(const std::string& text) {
  TFM_REQUIRE(text.find_first_of("\n\r") == std::string::npos,
              "a sentence holds a line break: give one sentence a string");
}

namespace {

// --- Tokenizer: tfm-tok and tfm-tok -d, line by line ------------------------

std::vector<std::vector<std::string>> encode(const Vocab& vocab, const std::vector<std::string>& texts) {
  std::vector<std::vector<std::string>> out;
  out.reserve(texts.size());
  for (const std::string& t : texts) {
    check_line(t);
    out.push_back(split_pieces(data::encode_line(vocab, t, false)));
  }
  return out;
}

std::vector<std::string> decode(const Vocab& vocab, const std::vector<std::vector<std::string>>& pieces) {
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (const auto& p : pieces) out.push_back(data::decode_line(vocab, join_pieces(p), false));
  return out;
}

// --- metrics: tfm-score's text metrics --------------------------------------

eval::Corpus corpus(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs) {
  TFM_REQUIRE(!hyps.empty(), "no hypotheses to score");
  TFM_REQUIRE(!refs.empty(), "no references to score against");
  for (size_t r = 0; r < refs.size(); ++r)
    TFM_REQUIRE(refs[r].size() == hyps.size(),
                "{} hypotheses but {} references in reference stream {}: they must pair up", hyps.size(),
                refs[r].size(), r + 1);
  for (const std::string& h : hyps) check_line(h);
  for (const auto& stream : refs)
    for (const std::string& r : stream) check_line(r);
  return eval::Corpus{hyps, refs};
}

struct Score {
  eval::Result result;
  int width = 1;
  std::string text() const {
    std::string line = eval::format_corpus({result}, eval::FormatOptions{.width = width});
    if (!line.empty() && line.back() == '\n') line.pop_back();
    return line;
  }
};

Score score_one(const eval::Corpus& c, eval::ScoreOptions o, eval::Metric m, int width) {
  o.metrics = {m};
  std::vector<eval::Result> results = eval::score_corpus(c, o);
  return Score{std::move(results.front()), width};
}

// refs: one stream (list of str) or several (list of lists), sacreBLEU's order.
using Refs = std::variant<std::vector<std::string>, std::vector<std::vector<std::string>>>;
std::vector<std::vector<std::string>> streams(const Refs& refs) {
  if (const auto* one = std::get_if<std::vector<std::string>>(&refs)) return {*one};
  return std::get<std::vector<std::vector<std::string>>>(refs);
}

Score bleu(const std::vector<std::string>& hyps, const Refs& refs, const std::string& tokenize, bool lowercase,
           const std::string& smooth_method, std::optional<double> smooth_value, int width) {
  eval::ScoreOptions o;
  o.bleu.tokenize = eval::parse_tokenizer(tokenize);
  o.bleu.lowercase = lowercase;
  o.bleu.smooth = eval::parse_smoothing(smooth_method);
  o.bleu.smooth_value = smooth_value;
  return score_one(corpus(hyps, streams(refs)), o, eval::Metric::bleu, width);
}

Score chrf(const std::vector<std::string>& hyps, const Refs& refs, int char_order, int word_order, int beta,
           bool lowercase, bool whitespace, int width) {
  eval::ScoreOptions o;
  o.chrf = eval::ChrfOptions{.char_order = char_order, .word_order = word_order, .beta = beta,
                             .lowercase = lowercase, .whitespace = whitespace};
  return score_one(corpus(hyps, streams(refs)), o, eval::Metric::chrf, width);
}

Score ter(const std::vector<std::string>& hyps, const Refs& refs, bool case_sensitive, bool normalized,
          bool no_punct, int width) {
  eval::ScoreOptions o;
  o.ter.case_sensitive = case_sensitive;
  o.ter.normalized = normalized;
  o.ter.no_punct = no_punct;
  return score_one(corpus(hyps, streams(refs)), o, eval::Metric::ter, width);
}

std::vector<Score> parseval(const std::vector<std::string>& test, const std::vector<std::string>& gold, int width) {
  eval::ScoreOptions o;
  o.metrics = {eval::Metric::parseval};
  std::vector<Score> out;
  for (eval::Result& r : eval::score_corpus(corpus(test, {gold}), o)) out.push_back(Score{std::move(r), width});
  return out;
}

// --- Checkpoint: what a checkpoint holds, as Python values -------------------

// A configuration value of the text form ("key = value") as a Python value.
nb::object config_value(std::string_view v) {
  if (v == "true") return nb::bool_(true);
  if (v == "false") return nb::bool_(false);
  const std::string s(v);
  char* end = nullptr;
  const long long i = std::strtoll(s.c_str(), &end, 10);
  if (!s.empty() && *end == '\0') return nb::int_(i);
  const double d = std::strtod(s.c_str(), &end);
  if (!s.empty() && *end == '\0') return nb::float_(d);
  return nb::str(s.c_str());
}

struct Checkpoint {
  explicit Checkpoint(const std::string& path) : file(path) {}
  ModelFile file;

  nb::dict config() const {
    nb::dict d;
    const std::string text = file.config().to_text();
    std::string_view rest = text;
    while (!rest.empty()) {
      const size_t nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
      const size_t eq = line.find(" = ");
      if (line.empty() || line.front() == '#' || eq == std::string_view::npos) continue;
      d[nb::str(std::string(line.substr(0, eq)).c_str())] = config_value(line.substr(eq + 3));
    }
    return d;
  }
  int64_t parameters() const {
    int64_t n = 0;
    for (const io::TensorInfo& t : file.reader().info().tensors) n += t.shape.numel();
    return n;
  }
  nb::object training_state() const {
    bool has = false;
    for (const io::SectionInfo& s : file.reader().info().sections) has = has || s.name == train::kStateSection;
    if (!has) return nb::none();
    const train::TrainState s = train::read_state(file.reader());
    nb::dict d;
    d["step"] = s.step;
    d["epoch"] = s.epoch;
    d["micro_batches"] = s.micro_batches;
    d["tokens"] = s.tokens;
    d["elapsed"] = s.elapsed;
    d["best_dev_nll"] = s.best_dev_nll ? nb::object(nb::float_(*s.best_dev_nll)) : nb::none();
    d["best_step"] = s.best_step;
    d["bad_steps"] = s.bad_steps;
    return d;
  }
};

}  // namespace
}  // namespace tfm::python

NB_MODULE(_tfm, m) {
  using namespace tfm::python;
  m.doc() = "tfm's library from Python: translation, tokenization, metrics and checkpoints.";

  static nb::object error = nb::exception<tfm::Error>(m, "Error", PyExc_RuntimeError);
  error.attr("__doc__") = "An error of tfm: the one-line message its programs print after 'error:'.";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const tfm::Error& e) {
      std::string what = e.what();
      if (!e.where().empty()) what += " (" + e.where() + ")";
      PyErr_SetString(error.ptr(), what.c_str());
    }
  });

  nb::class_<tfm::Vocab>(m, "Tokenizer", kTokenizerDoc)
      .def("__init__", [](tfm::Vocab* v, const std::string& path) { new (v) tfm::Vocab(tfm::Vocab::load(path)); },
           "path"_a, "Opens a SentencePiece model, a vocabulary bundle or a tfm checkpoint.")
      .def("encode", &encode, "texts"_a, nb::call_guard<nb::gil_scoped_release>(),
           "Each sentence's pieces, as tfm-tok -m PATH writes them.")
      .def("decode", &decode, "pieces"_a, nb::call_guard<nb::gil_scoped_release>(),
           "Each list of pieces as text, as tfm-tok -d -m PATH writes it.")
      .def_prop_ro("size", &tfm::Vocab::size, "Pieces in the vocabulary.")
      .def("__len__", &tfm::Vocab::size);

  nb::module_ metrics = m.def_submodule("metrics", kMetricsDoc);
  nb::class_<Score>(metrics, "Score", "A corpus score as tfm-score prints it.")
      .def_prop_ro("name", [](const Score& s) { return s.result.name; }, "BLEU, chrF2, chrF2++, TER, PARSEVAL")
      .def_prop_ro("score", [](const Score& s) { return s.result.score; }, "The score, unrounded.")
      .def_prop_ro("signature", [](const Score& s) { return s.result.signature; },
                   "sacreBLEU's signature: nrefs:1|case:mixed|...|version:tfm-X")
      .def_prop_ro("details", [](const Score& s) { return s.result.details; },
                   "BLEU's precisions and brevity penalty, PARSEVAL's counts, else empty.")
      .def("__str__", &Score::text)
      .def("__repr__", [](const Score& s) { return "<tfm.metrics.Score " + s.text() + ">"; })
      .def("__float__", [](const Score& s) { return s.result.score; });
  metrics.def("bleu", &bleu, "hyps"_a, "refs"_a, "tokenize"_a = "13a", "lowercase"_a = false,
              "smooth_method"_a = "exp", "smooth_value"_a = nb::none(), "width"_a = 1,
              nb::call_guard<nb::gil_scoped_release>(),
              "Corpus BLEU as tfm-score (sacreBLEU's corpus_bleu): refs a list of reference strings, or a "
              "list of such lists (several references).");
  metrics.def("chrf", &chrf, "hyps"_a, "refs"_a, "char_order"_a = 6, "word_order"_a = 0, "beta"_a = 2,
              "lowercase"_a = false, "whitespace"_a = false, "width"_a = 1, nb::call_guard<nb::gil_scoped_release>(),
              "Corpus chrF as tfm-score --metrics chrf (word_order=2: chrF++).");
  metrics.def("ter", &ter, "hyps"_a, "refs"_a, "case_sensitive"_a = false, "normalized"_a = false,
              "no_punct"_a = false, "width"_a = 1, nb::call_guard<nb::gil_scoped_release>(),
              "Corpus TER as tfm-score --metrics ter.");
  metrics.def("parseval", &parseval, "test"_a, "gold"_a, "width"_a = 2, nb::call_guard<nb::gil_scoped_release>(),
              "Parse trees against gold trees, one a string, as tfm-score --metrics parseval (EVALB, "
              "COLLINS.prm): two scores, all sentences and those of at most 40 words.");

  nb::class_<Checkpoint>(m, "Checkpoint", kCheckpointDoc)
      .def(nb::init<const std::string&>(), "path"_a)
      .def_prop_ro("path", [](const Checkpoint& c) { return c.file.path(); }, "The checkpoint's path.")
      .def_prop_ro("config", &Checkpoint::config, "The model's configuration: {key: value} of its text form.")
      .def_prop_ro("vocab_size", [](const Checkpoint& c) { return c.file.config().vocab_size; },
                   "The model's output ids.")
      .def_prop_ro("tokenizer_size", [](const Checkpoint& c) -> std::optional<int64_t> {
            if (!c.file.vocab()) return std::nullopt;
            return c.file.vocab()->size();
          }, "Pieces of the embedded tokenizer (None: none embedded).")
      .def_prop_ro("parameters", &Checkpoint::parameters, "Parameters: the elements of every tensor.")
      .def_prop_ro("tensors", [](const Checkpoint& c) {
            std::vector<std::pair<std::string, std::vector<int64_t>>> out;
            for (const tfm::io::TensorInfo& t : c.file.reader().info().tensors)
              out.emplace_back(t.name, std::vector<int64_t>(t.shape.begin(), t.shape.end()));
            return out;
          }, "(name, shape) of every tensor, in the file's order.")
      .def_prop_ro("training_state", &Checkpoint::training_state,
                   "Where training stood (step, epoch, tokens, elapsed seconds, ...), or None.");

  m.def("average", [](const std::vector<std::string>& paths, const std::string& out, bool keep_state) {
          TFM_REQUIRE(!paths.empty(), "no checkpoints to average");
          tfm::AverageOptions o;
          o.keep_state = keep_state;
          const tfm::AverageReport r = tfm::average_checkpoints(paths, out, o);
          return std::pair{r.tensors, r.elements};
        }, "paths"_a, "out"_a, "keep_state"_a = false, nb::call_guard<nb::gil_scoped_release>(),
        "Averages checkpoints into `out` as tfm-avgckpt -o OUT PATHS... (keep_state: --keep-state); "
        "returns (tensors, parameters).");

  bind_translator(m);
}
