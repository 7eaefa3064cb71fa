#include "libcore/eval/score.h"

#include <fmt/format.h>

#include <algorithm>

#include "libcore/base/error.h"
#include "libcore/base/json.h"
#include "libcore/base/log.h"
#include "libcore/data/line_reader.h"
#include "libcore/eval/paper_bleu.h"
#include "libcore/eval/unicode.h"

#ifndef TFM_VERSION
#define TFM_VERSION "0.0.0"
#endif

namespace tfm::eval {

const char* metric_name(Metric m) {
  switch (m) {
    case Metric::bleu: return "bleu";
    case Metric::chrf: return "chrf";
    case Metric::ter: return "ter";
    case Metric::parseval: return "parseval";
  }
  return "?";
}

Metric parse_metric(std::string_view name) {
  for (Metric m : {Metric::bleu, Metric::chrf, Metric::ter, Metric::parseval})
    if (name == metric_name(m)) return m;
  fail("unknown metric '{}' (known: bleu, chrf, ter, parseval)", name);
}

std::string signature_version() { return std::string("tfm-") + TFM_VERSION; }

namespace {

std::string display_name(const std::string& path) { return path == "-" ? "stdin" : path; }

std::vector<std::string> read_lines(const std::string& path) {
  data::LineReader reader(path);
  std::vector<std::string> lines;
  std::string line;
  while (reader.next(line)) {
    if (!valid_utf8(line))
      throw Error("not valid UTF-8", fmt::format("{}:{}", display_name(path), reader.line_number()));
    line.resize(rstrip(line).size());
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace

Corpus read_corpus(const std::string& hyp_path, const std::vector<std::string>& ref_paths, bool trees) {
  Corpus c;
  c.hyps = read_lines(hyp_path);
  TFM_REQUIRE(!c.hyps.empty(), "{} is empty: no hypotheses to score", display_name(hyp_path));
  for (const std::string& path : ref_paths) {
    c.refs.push_back(read_lines(path));
    const size_t gold = c.refs.back().size();
    if (trees && c.hyps.size() > gold &&
        std::all_of(c.hyps.begin() + static_cast<ptrdiff_t>(gold), c.hyps.end(),
                    [](const std::string& line) { return line.empty(); })) {
      log::warn("{} has {} blank line{} after its last tree, past the {} trees of {}: left out",
                display_name(hyp_path), c.hyps.size() - gold, c.hyps.size() - gold == 1 ? "" : "s", gold,
                path);
      c.hyps.resize(gold);
    }
    TFM_REQUIRE(c.refs.back().size() == c.hyps.size(), "{} has {} lines but {} has {}",
                display_name(hyp_path), c.hyps.size(), path, c.refs.back().size());
  }
  return c;
}

namespace {

Result bleu_result(const BleuScore& s, const BleuOptions& o, int nrefs) {
  return {"BLEU", bleu_signature(o, nrefs, signature_version()), s.score, bleu_details(s), s, {}, true};
}

bool wants(const ScoreOptions& o, Metric m) {
  return std::find(o.metrics.begin(), o.metrics.end(), m) != o.metrics.end();
}

// EVALB's summary of `counts`: F1 the score, the rest its details.
Result parseval_result(const ParsevalCounts& counts, const std::string& len, bool tagged) {
  Result r{"PARSEVAL",
           fmt::format("evalb:collins|len:{}|tags:{}|version:{}", len, tagged ? "own" : "none", signature_version()),
           counts.f1(),
           fmt::format("(P = {:.2f} R = {:.2f} CM = {:.2f} TA = {} sent = {} error = {} skip = {})",
                       counts.precision(), counts.recall(), counts.complete_match(),
                       tagged ? fmt::format("{:.2f}", counts.tagging_accuracy()) : "n/a", counts.sentences,
                       counts.errors, counts.skipped),
           {}, counts, tagged};
  return r;
}

std::vector<Result> score_parseval(const Corpus& c, const ScoreOptions& o) {
  TFM_REQUIRE(c.refs.size() == 1, "parseval scores against one file of gold trees, not {}", c.refs.size());
  TFM_REQUIRE(o.metrics.size() == 1, "parseval goes alone, without other metrics");
  const ParsevalResult p = parseval(c.refs[0], c.hyps, o.parseval);
  constexpr size_t kShown = 10;
  for (size_t i = 0; i < std::min(kShown, p.errors.size()); ++i)
    log::warn("line {}: {}", p.errors[i].first, p.errors[i].second);
  if (p.errors.size() > kShown) log::warn("... and {} more error sentences", p.errors.size() - kShown);
  return {parseval_result(p.all, "all", p.tagged),
          parseval_result(p.within_cutoff, fmt::format("<={}", p.cutoff_len), p.tagged)};
}

}  // namespace

std::vector<Result> score_corpus(const Corpus& c, const ScoreOptions& o) {
  if (wants(o, Metric::parseval)) return score_parseval(c, o);
  const int nrefs = static_cast<int>(c.refs.size());
  const std::string version = signature_version();
  std::vector<Result> out;
  if (wants(o, Metric::bleu)) {
    BleuStats sum(o.bleu.max_order);
    for (const BleuStats& s : bleu_corpus_stats(c.hyps, c.refs, o.bleu)) sum += s;
    out.push_back(bleu_result(compute_bleu(sum, o.bleu), o.bleu, nrefs));
  }
  if (o.paper_bleu) {
    const BleuScore s = paper_bleu(c.hyps, c.refs);
    out.push_back({"BLEU-paper", fmt::format("nrefs:{}|tok:moses-de|compound:atat|bleu:multi-bleu|version:{}",
                                             nrefs, version),
                   s.score, bleu_details(s), s, {}, true});
  }
  if (wants(o, Metric::chrf)) {
    const ChrfStats sum = sum_chrf_stats(chrf_corpus_stats(c.hyps, c.refs, o.chrf), o.chrf);
    out.push_back({chrf_name(o.chrf), chrf_signature(o.chrf, nrefs, version), chrf_score(sum, o.chrf), "", {}, {}, true});
  }
  if (wants(o, Metric::ter))
    out.push_back({"TER", ter_signature(o.ter, nrefs, version), ter_score(ter_corpus_stats(c.hyps, c.refs, o.ter)),
                   "", {}, {}, true});
  return out;
}

std::vector<Result> score_segments(const Corpus& c, const ScoreOptions& o) {
  TFM_REQUIRE(o.metrics.size() == 1, "sentence-level scores take one metric, not {}", o.metrics.size());
  const int nrefs = static_cast<int>(c.refs.size());
  const std::string version = signature_version();
  std::vector<Result> out;
  switch (o.metrics[0]) {
    case Metric::bleu: {
      BleuOptions b = o.bleu;
      b.effective_order = true;  // as sacreBLEU's --sentence-level
      for (const BleuStats& s : bleu_corpus_stats(c.hyps, c.refs, b))
        out.push_back(bleu_result(compute_bleu(s, b), b, nrefs));
      break;
    }
    case Metric::chrf:
      for (const ChrfStats& s : chrf_corpus_stats(c.hyps, c.refs, o.chrf))
        out.push_back({chrf_name(o.chrf), chrf_signature(o.chrf, nrefs, version), chrf_score(s, o.chrf), "", {}, {}, true});
      break;
    case Metric::ter:
      for (const TerStats& s : ter_corpus_stats(c.hyps, c.refs, o.ter))
        out.push_back({"TER", ter_signature(o.ter, nrefs, version), ter_score({s}), "", {}, {}, true});
      break;
    case Metric::parseval: fail("parseval is a corpus score: no sentence-level scores");
  }
  return out;
}

namespace {

std::string number(double score, int width) { return fmt::format("{:.{}f}", score, width); }

std::string text_line(const Result& r, int width) {
  std::string line = fmt::format("{}|{} = {}", r.name, r.signature, number(r.score, width));
  if (!r.details.empty()) line += " " + r.details;
  return line;
}

std::string json_object(const Result& r, int width) {
  JsonWriter j;
  j.begin_object().field("name", r.name).field("score", std::stod(number(r.score, width)))
      .field("signature", r.signature);
  if (!r.details.empty()) j.field("verbose_score", r.details);
  // The signature's fields, as sacreBLEU's JSON has them.
  std::string_view sig = r.signature;
  while (!sig.empty()) {
    const std::string_view item = sig.substr(0, sig.find('|'));
    const size_t colon = item.find(':');
    j.field(item.substr(0, colon), item.substr(colon + 1));
    sig.remove_prefix(std::min(sig.size(), item.size() + 1));
  }
  j.field("value", r.score);  // unrounded
  if (r.bleu) {
    const BleuScore& b = *r.bleu;
    j.key("counts").begin_array();
    for (double v : b.counts) j.value(v);
    j.end_array().key("totals").begin_array();
    for (double v : b.totals) j.value(v);
    j.end_array().key("precisions").begin_array();
    for (double v : b.precisions) j.value(v);
    j.end_array().field("bp", b.bp).field("ratio", b.ratio).field("sys_len", b.sys_len)
        .field("ref_len", b.ref_len);
  }
  if (r.parseval) {
    const ParsevalCounts& p = *r.parseval;
    j.field("recall", p.recall()).field("precision", p.precision()).field("complete_match", p.complete_match());
    if (r.parseval_tagged) j.field("tagging_accuracy", p.tagging_accuracy());
    else j.key("tagging_accuracy").null();
    j.field("average_crossing", p.average_crossing()).field("no_crossing", p.no_crossing_rate())
        .field("two_or_less_crossing", p.two_or_less_crossing_rate()).field("sentences", p.sentences)
        .field("errors", p.errors).field("skipped", p.skipped).field("valid", p.valid())
        .field("matched", p.matched).field("gold_brackets", p.gold_brackets)
        .field("test_brackets", p.test_brackets).field("words", p.words).field("correct_tags", p.correct_tags);
  }
  j.end_object();
  return j.str();
}

}  // namespace

std::string format_corpus(const std::vector<Result>& results, const FormatOptions& f) {
  std::string out;
  if (f.json) {
    if (results.size() == 1) return json_object(results[0], f.width) + "\n";
    out = "[";
    for (size_t i = 0; i < results.size(); ++i) out += (i ? ",\n " : "") + json_object(results[i], f.width);
    return out + "]\n";
  }
  if (f.score_only) {
    for (const Result& r : results) out += number(r.score, f.width) + "\n";
    return out;
  }
  // Right-align the names so that the " = " line up, as sacreBLEU does (a
  // signature may hold a '=': PARSEVAL's "len:<=40").
  std::vector<std::string> lines;
  size_t longest = 0;
  for (const Result& r : results) {
    lines.push_back(text_line(r, f.width));
    longest = std::max(longest, lines.back().find(" = "));
  }
  for (const std::string& line : lines)
    out += std::string(longest - line.find(" = "), ' ') + line + "\n";
  return out;
}

std::string format_segments(const std::vector<Result>& results, const FormatOptions& f) {
  std::string out;
  for (const Result& r : results) {
    if (f.json) {
      out += json_object(r, f.width);
    } else if (f.score_only) {
      out += number(r.score, f.width);
    } else {
      out += text_line(r, f.width);
    }
    out += '\n';
  }
  return out;
}

}  // namespace tfm::eval
