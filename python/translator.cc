// tfm.Translator: tfm-decode's Translator (libcore/decode/translate.h) and
// tfm-score -m's forced decoding (libcore/eval/model_score.h) over one
// loaded checkpoint. The model is loaded as tfm-decode loads it (device,
// precision, packed weights); the libcore Translator, whose memory is
// planned for its options, is kept between calls with the same options.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>
#include <omp.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "libcore/base/device.h"
#include "libcore/base/precision.h"
#include "libcore/data/tokenize.h"
#include "libcore/decode/translate.h"
#include "libcore/eval/model_score.h"
#include "libcore/model/model_file.h"
#include "python/module.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace tfm::python {
namespace {

// Sentences as text, or as lists of pieces.
using Sources = std::variant<std::vector<std::string>, std::vector<std::vector<std::string>>>;

struct PyHypothesis {
  nb::object output;  // text, or a list of pieces
  double score = 0, log_prob = 0;
  std::vector<float> token_log_probs;
  nb::object attention = nb::none();  // (|Y| + 1, S) float32, or None
};

// A float vector handed to NumPy without a copy: the array owns it.
nb::object to_array(std::vector<float>&& values, size_t rows, size_t cols) {
  auto* owned = new std::vector<float>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, float, nb::ndim<2>>(owned->data(), {rows, cols}, owner));
}

// The calling thread's OpenMP threads for one call (threads > 0), as they
// were after it: another Translator's calls keep their own.
class Threads {
 public:
  explicit Threads(int threads) : before_(omp_get_max_threads()), set_(threads > 0) {
    if (set_) omp_set_num_threads(threads);
  }
  ~Threads() {
    if (set_) omp_set_num_threads(before_);
  }
  Threads(const Threads&) = delete;
  Threads& operator=(const Threads&) = delete;

 private:
  int before_;
  bool set_;
};

class PyTranslator {
 public:
  PyTranslator(const std::string& path, const std::string& device, const std::string& precision, int threads)
      : device_(select_device(parse_device(device))),
        precision_(kDecodePrecision.resolve(kDecodePrecision.parse("precision", precision), device_)),
        threads_(threads),
        file_(path) {
    TFM_REQUIRE(threads >= 0, "threads must be >= 0, got {}", threads);
    weights_ = file_.load_weights(device_, precision_);
    weights_->pack_weights();  // as tfm-decode: the CPU's GEMMs read packed panels
  }

  nb::list translate(const Sources& sources, int64_t beam, double alpha, int64_t n_best, double max_len_a,
                     double max_len_b, bool return_scores, bool return_attention, const std::string& length_penalty,
                     const std::string& early_stopping) {
    const bool text = std::holds_alternative<std::vector<std::string>>(sources);
    TranslateOptions o;
    o.search.beam_size = beam;
    o.search.alpha = alpha;
    o.search.length_penalty = parse_length_penalty(length_penalty);
    o.search.early_stopping = parse_early_stopping(early_stopping);
    o.search.n_best = n_best;
    o.max_len_a = max_len_a;
    o.max_len_b = max_len_b;
    o.detok = text;
    if (return_attention) o.search.attention_layer = static_cast<int>(weights_->config().decoder_layers - 1);
    std::vector<LineTranslation> results;
    std::vector<std::vector<std::string>> outputs;  // [line][hypothesis]
    {
      nb::gil_scoped_release unlocked;
      const std::vector<std::string> lines = input_lines(sources, Side::source);
      std::lock_guard<std::mutex> lock(mutex_);
      const Threads threads(threads_);
      Translator& t = translator(o);
      results = t.translate(lines);
      for (const LineTranslation& r : results) {
        std::vector<std::string>& out = outputs.emplace_back();
        for (const Hypothesis& h : r.nbest) out.push_back(t.tokens_text(h.tokens));
      }
    }
    const auto output = [&](std::string& s) { return text ? nb::object(nb::str(s.c_str(), s.size())) : nb::cast(split_pieces(s)); };
    nb::list out;
    const bool plain = n_best == 1 && !return_scores && !return_attention;
    for (size_t i = 0; i < results.size(); ++i) {
      if (plain) {
        out.append(output(outputs[i].front()));
        continue;
      }
      nb::list nbest;
      for (size_t k = 0; k < results[i].nbest.size(); ++k) {
        Hypothesis& h = results[i].nbest[k];
        PyHypothesis p{output(outputs[i][k]), h.score, h.log_prob, std::move(h.token_log_probs)};
        if (return_attention) {
          const auto S = static_cast<size_t>(results[i].attention_columns);
          const size_t rows = S > 0 ? h.attention.size() / S : 0;
          p.attention = to_array(std::move(h.attention), rows, S);
        }
        nbest.append(nb::cast(std::move(p)));
      }
      out.append(nbest);
    }
    return out;
  }

  eval::ModelScores score(const Sources& sources, const Sources& targets) {
    nb::gil_scoped_release unlocked;
    const std::vector<std::string> src = input_lines(sources, Side::source);
    const std::vector<std::string> tgt = input_lines(targets, Side::target);
    TFM_REQUIRE(src.size() == tgt.size(), "{} sources but {} targets: they must pair up", src.size(), tgt.size());
    eval::Pairs pairs;
    for (size_t i = 0; i < src.size(); ++i)
      eval::add_pair(pairs, src[i], tgt[i], file_.vocab(), file_.config().vocab_size,
                     [&](bool source) { return fmt::format("{} {}", source ? "source" : "target", i + 1); });
    // tfm-score -m's precisions: fp32, or int8 as the Translator's.
    eval::ModelScoreOptions o;
    o.device = device_;
    o.precision = kScorePrecision.resolve(precision_ == Precision::int8 ? Precision::int8 : Precision::fp32, device_);
    std::lock_guard<std::mutex> lock(mutex_);
    const Threads threads(threads_);
    return eval::score_with_model(file_, pairs, o);
  }

  const ModelFile& file() const { return file_; }
  std::string device() const { return device_.str(); }
  std::string precision() const { return std::string(precision_name(precision_)); }

 private:
  // The lines tfm-decode (or tfm-score -m) would read: text encoded by the
  // checkpoint's tokenizer as tfm-tok encodes it, or the pieces joined.
  std::vector<std::string> input_lines(const Sources& sources, Side side) const {
    std::vector<std::string> lines;
    if (const auto* texts = std::get_if<std::vector<std::string>>(&sources)) {
      TFM_REQUIRE(file_.vocab() || texts->empty(),
                  "{} embeds no tokenizer: give lists of pieces, not text", file_.path());
      for (const std::string& s : *texts) {
        check_line(s);
        lines.push_back(data::encode_line(*file_.vocab(), s, false, side));
      }
    } else {
      for (const auto& pieces : std::get<std::vector<std::vector<std::string>>>(sources))
        lines.push_back(join_pieces(pieces));
    }
    return lines;
  }

  // The libcore Translator for these options: the last one when they are
  // the same (its decoders' memory is planned for them).
  Translator& translator(const TranslateOptions& o) {
    const auto key = [](const TranslateOptions& t) {
      return std::tuple{t.search.beam_size, t.search.alpha, t.search.n_best, t.search.attention_layer, t.max_len_a,
                        t.max_len_b, t.detok, t.search.length_penalty, t.search.early_stopping};
    };
    if (!translator_ || key(translator_->options()) != key(o)) {
      translator_.reset();
      translator_ = std::make_unique<Translator>(*weights_, file_.vocab(), o);
    }
    return *translator_;
  }

  Device device_;
  Precision precision_;
  int threads_;
  ModelFile file_;
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Translator> translator_;
  std::mutex mutex_;  // one call at a time: the decoders are the Translator's
};

}  // namespace

void bind_translator(nb::module_& m) {
  nb::class_<PyHypothesis>(m, "Hypothesis", "One hypothesis of Translator.translate, best first in its list.")
      .def_ro("output", &PyHypothesis::output, "Text, or a list of pieces (as the sources were given).")
      .def_ro("score", &PyHypothesis::score, "log_prob over the length penalty: what the search ranks by.")
      .def_ro("log_prob", &PyHypothesis::log_prob, "The sum of token_log_probs.")
      .def_ro("token_log_probs", &PyHypothesis::token_log_probs, "Each output token's, then eos's.")
      .def_ro("attention", &PyHypothesis::attention,
              "With return_attention: a float32 array (output tokens + eos, source tokens + eos) of the last "
              "decoder layer's cross-attention, mean over heads; else None.")
      .def("__repr__", [](const PyHypothesis& h) {
        return "<tfm.Hypothesis " + nb::cast<std::string>(nb::repr(h.output)) + " score=" + std::to_string(h.score) + ">";
      });

  nb::class_<eval::ModelScores>(m, "ModelScores", "Translator.score's result, tfm-score -m's numbers.")
      .def_prop_ro("perplexity", &eval::ModelScores::perplexity, "exp(-log_prob / tokens)")
      .def_ro("log_prob", &eval::ModelScores::log_prob, "Over the corpus.")
      .def_ro("tokens", &eval::ModelScores::tokens, "Target tokens, eos included.")
      .def_prop_ro("sentences", [](const eval::ModelScores& s) {
            std::vector<double> out;
            for (const eval::SentenceScore& x : s.sentences) out.push_back(x.log_prob);
            return out;
          }, "Each sentence's log-probability.")
      .def_prop_ro("token_log_probs", [](const eval::ModelScores& s) {
            std::vector<std::vector<double>> out;
            for (const eval::SentenceScore& x : s.sentences) out.push_back(x.token_log_probs);
            return out;
          }, "Each sentence's tokens' log-probabilities, eos last.");

  nb::class_<PyTranslator>(m, "Translator", kTranslatorDoc)
      .def(nb::init<const std::string&, const std::string&, const std::string&, int>(), "path"_a,
           "device"_a = "auto", "precision"_a = "auto", "threads"_a = 0, nb::call_guard<nb::gil_scoped_release>())
      .def("translate", &PyTranslator::translate, "sources"_a, "beam"_a = 4, "alpha"_a = 0.6, "n_best"_a = 1,
           "max_len_a"_a = 1.0, "max_len_b"_a = 50.0, "return_scores"_a = false, "return_attention"_a = false,
           "length_penalty"_a = "gnmt", "early_stopping"_a = "bound",
           "Translates the sources as tfm-decode does (see help(tfm.Translator)).")
      .def("score", &PyTranslator::score, "sources"_a, "targets"_a,
           "Each target's log-probability given its source, as tfm-score -m (see help(tfm.Translator)).")
      .def_prop_ro("device", &PyTranslator::device, "The device it runs on.")
      .def_prop_ro("precision", &PyTranslator::precision, "The precision it decodes in.")
      .def_prop_ro("path", [](const PyTranslator& t) { return t.file().path(); }, "The checkpoint's path.");
}

}  // namespace tfm::python
