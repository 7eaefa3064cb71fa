// libcore/eval/parseval.h: EVALB with COLLINS.prm on hand-made tree pairs
// whose counts are worked out by hand in the table (brackets over the words
// left once punctuation is removed; TOP never counts), then the summaries
// EVALB prints from them.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "libcore/base/error.h"
#include "libcore/eval/parseval.h"
#include "libcore/eval/score.h"

using namespace tfm;
using namespace tfm::eval;

namespace {

// Words: The cat sat on the mat (6, the '.' removed). Brackets: S [0,6),
// NP [0,2), VP [2,6), PP [3,6), NP [4,6).
const std::string kGold =
    "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))";

struct Want {
  ParsevalStatus status = ParsevalStatus::ok;
  int64_t gold = 0, test = 0, matched = 0, crossing = 0, words = 0, tags = 0;
};

struct Case {
  const char* name;
  std::string gold, test;
  Want want;
  bool tagged = true;
};

const std::vector<Case>& cases() {
  using S = ParsevalStatus;
  static const std::vector<Case> c = {
      {"identical trees", kGold, kGold, {S::ok, 5, 5, 5, 0, 6, 6}},
      {"one wrong label (PP as SBAR)", kGold,
       "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (SBAR (IN on) (NP (DT the) (NN mat)))) (. .)))",
       {S::ok, 5, 5, 4, 0, 6, 6}},
      {"one wrong span (the verb in the subject), crossing the gold VP", kGold,
       "(TOP (S (NP (DT The) (NN cat) (VBD sat)) (VP (PP (IN on) (NP (DT the) (NN mat)))) (. .)))",
       {S::ok, 5, 5, 3, 1, 6, 6}},
      {"one wrong tag", kGold,
       "(TOP (S (NP (DT The) (NN cat)) (VP (VBN sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))",
       {S::ok, 5, 5, 5, 0, 6, 5}},
      {"punctuation attached elsewhere does not count", kGold,
       "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat) (. .))))))",
       {S::ok, 5, 5, 5, 0, 6, 6}},
      {"a constituent of punctuation alone does not count", kGold,
       "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (X (. .))))",
       {S::ok, 5, 5, 5, 0, 6, 6}},
      {"punctuation tagged as a word: length mismatch", kGold,
       "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (NN .)))",
       {S::error}},
      {"one word fewer: length mismatch", kGold,
       "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (NN mat)))) (. .)))", {S::error}},
      {"another word: words mismatch", kGold,
       "(TOP (S (NP (DT The) (NN dog)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))", {S::error}},
      {"unbalanced test tree", kGold, "(TOP (S (NP (DT The) (NN cat))", {S::error}},
      {"a word beside a subtree", kGold, "(TOP (S The (NN cat)))", {S::error}},
      {"bad gold tree", "(TOP (S (NN cat)", "(TOP (S (NN cat)))", {S::error}},
      {"empty test line: skipped", kGold, "", {S::skip}},
      {"test of punctuation alone: skipped", "(TOP (S (. .)))", "(TOP (S (. .)))", {S::skip}},
      // EVALB checks for a test word before anything else (issue 38).
      {"an empty root (TOP ): skipped", kGold, "(TOP )", {S::skip}},
      {"empty brackets, no word: skipped", kGold, "(TOP (S ) (NP))", {S::skip}},
      {"unbalanced without a word: skipped", kGold, "(TOP (S", {S::skip}},
      {"no test word, bad gold tree: skipped", "(TOP (S (NN cat)", "(TOP )", {S::skip}},
      // Unary chains: every bracket counts, the same span and label twice too
      // (EVALB's README, [7] 5).
      {"a unary chain the test lacks", "(TOP (S (VP (VB Go) (ADVP (RB away)))))",
       "(TOP (VP (VB Go) (ADVP (RB away))))", {S::ok, 3, 2, 2, 0, 2, 2}},
      {"an extra unary NP over NP", "(TOP (S (NP (PRP He)) (VP (VBD left))))",
       "(TOP (S (NP (NP (PRP He))) (VP (VBD left))))", {S::ok, 3, 4, 3, 0, 2, 2}},
      {"NP NP in gold, NP NP NP in test", "(TOP (S (NP (NP (PRP He))) (VP (VBD left))))",
       "(TOP (S (NP (NP (NP (PRP He)))) (VP (VBD left))))", {S::ok, 4, 5, 4, 0, 2, 2}},
      // Labels: EQ_LABEL ADVP PRT; function tags cut at '-' and '='.
      {"ADVP and PRT are one label (the tags still differ)", "(TOP (S (VP (VB Give) (PRT (RP up)))))",
       "(TOP (S (VP (VB Give) (ADVP (RB up)))))", {S::ok, 3, 3, 3, 0, 2, 1}},
      {"function tags and indices do not count", "(TOP (S (NP-SBJ-1 (PRP He)) (VP=2 (VBD left))))",
       "(TOP (S (NP (PRP He)) (VP (VBD left))))", {S::ok, 3, 3, 3, 0, 2, 2}},
      {"a root not labelled TOP counts", "(S (NP (PRP He)) (VP (VBD left)))",
       "(S (NP (PRP He)) (VP (VBD left)))", {S::ok, 3, 3, 3, 0, 2, 2}},
      {"-NONE- leaves are removed", "(TOP (S (NP (-NONE- *)) (VP (VBD left) (NP (PRP it)))))",
       "(TOP (S (VP (VBD left) (NP (PRP it)))))", {S::ok, 3, 3, 3, 0, 2, 2}},
      // Hypotheses without tags (XX): the gold tags are put in.
      {"untagged: punctuation by the gold tags", kGold,
       "(TOP (S (NP (XX The) (XX cat)) (VP (XX sat) (PP (XX on) (NP (XX the) (XX mat)))) (XX .)))",
       {S::ok, 5, 5, 5, 0, 6, 0}, false},
      {"untagged: one word fewer", kGold,
       "(TOP (S (NP (XX The) (XX cat)) (VP (XX sat) (PP (XX on) (NP (XX mat)))) (XX .)))", {S::error}, false},
  };
  return c;
}

}  // namespace

TEST_CASE("parseval: hand-made pairs, sentence by sentence", "[parseval]") {
  for (const Case& c : cases()) {
    INFO(c.name << "\n  gold: " << c.gold << "\n  test: " << c.test);
    const SentenceParseval s = parseval_sentence(c.gold, c.test, c.tagged);
    INFO("error: " << s.error);
    CHECK(s.status == c.want.status);
    if (c.want.status != ParsevalStatus::ok) {
      CHECK((s.status != ParsevalStatus::error || !s.error.empty()));
      continue;
    }
    const std::vector<std::pair<const char*, std::pair<int64_t, int64_t>>> got = {
        {"gold brackets", {s.gold_brackets, c.want.gold}}, {"test brackets", {s.test_brackets, c.want.test}},
        {"matched", {s.matched, c.want.matched}},          {"crossing", {s.crossing, c.want.crossing}},
        {"words", {s.words, c.want.words}},                {"correct tags", {s.correct_tags, c.want.tags}}};
    for (const auto& [what, pair] : got) {
      INFO(what);
      CHECK(pair.first == pair.second);
    }
  }
}

TEST_CASE("parseval: the summaries leave error and skipped sentences out", "[parseval]") {
  // Identical (5 brackets), one wrong span (3 of 5, one crossing), a length
  // mismatch (error), an empty test line (skipped).
  const std::vector<std::string> gold = {kGold, kGold, kGold, kGold};
  const std::vector<std::string> test = {
      kGold, "(TOP (S (NP (DT The) (NN cat) (VBD sat)) (VP (PP (IN on) (NP (DT the) (NN mat)))) (. .)))",
      "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (NN mat)))) (. .)))", ""};
  const ParsevalResult r = parseval(gold, test);
  const ParsevalCounts& a = r.all;
  CHECK(r.tagged);
  CHECK(a.sentences == 4);
  CHECK(a.errors == 1);
  CHECK(a.skipped == 1);
  CHECK(a.valid() == 2);
  CHECK(a.matched == 8);
  CHECK(a.gold_brackets == 10);
  CHECK(a.test_brackets == 10);
  CHECK(a.recall() == Approx(80.0));
  CHECK(a.precision() == Approx(80.0));
  CHECK(a.f1() == Approx(80.0));
  CHECK(a.complete_match() == Approx(50.0));
  CHECK(a.average_crossing() == Approx(0.5));
  CHECK(a.no_crossing_rate() == Approx(50.0));
  CHECK(a.two_or_less_crossing_rate() == Approx(100.0));
  CHECK(a.tagging_accuracy() == Approx(100.0));
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].first == 3);
  CHECK_THAT(r.errors[0].second, Catch::Contains("length mismatch"));

  // P 75, R 100: F1 = 2 * 75 * 100 / 175.
  const ParsevalResult u = parseval({"(TOP (S (NP (PRP He)) (VP (VBD left))))"},
                                    {"(TOP (S (NP (NP (PRP He))) (VP (VBD left))))"});
  CHECK(u.all.f1() == Approx(2 * 75.0 * 100.0 / 175.0));
  CHECK(u.all.complete_match() == 0.0);

  CHECK_THROWS_AS(parseval({kGold}, {}), Error);
}

TEST_CASE("parseval: length <= 40 counts every gold leaf but -NONE-", "[parseval]") {
  auto sentence = [](int words, bool trace, const char* tag) {
    std::string t = "(TOP (S (NP";
    for (int i = 0; i < words; ++i) t += std::string(" (") + tag + " w" + std::to_string(i) + ")";
    t += ")";
    if (trace) t += " (NP (-NONE- *))";
    return t + " (. .)))";
  };
  // 39 words and '.' (40), 40 and '.' (41: punctuation counts), 39 and a
  // trace and '.' (40: the trace does not).
  const std::vector<std::string> gold = {sentence(39, false, "NN"), sentence(40, false, "NN"),
                                         sentence(39, true, "NN")};
  const std::vector<std::string> test = {sentence(39, false, "NN"), sentence(40, false, "NN"),
                                         sentence(39, false, "NN")};
  const ParsevalResult r = parseval(gold, test);
  CHECK(r.all.sentences == 3);
  CHECK(r.within_cutoff.sentences == 2);
  CHECK(r.all.matched == 6);
  CHECK(r.within_cutoff.matched == 4);
  ParsevalOptions o;
  o.cutoff_len = 41;
  CHECK(parseval(gold, test, o).within_cutoff.sentences == 3);
}

TEST_CASE("parseval: hypotheses tagged XX are untagged", "[parseval]") {
  const std::string untagged =
      "(TOP (S (NP (XX The) (XX cat)) (VP (XX sat) (PP (XX on) (NP (XX the) (XX mat)))) (XX .)))";
  const ParsevalResult r = parseval({kGold}, {untagged});
  CHECK_FALSE(r.tagged);
  CHECK(r.all.errors == 0);
  CHECK(r.all.f1() == Approx(100.0));
  CHECK(r.all.correct_tags == 0);
  // Told they are tagged, the XX on '.' keeps it: a length mismatch.
  ParsevalOptions o;
  o.tagged = true;
  CHECK(parseval({kGold}, {untagged}, o).all.errors == 1);
  // One real tag among them: tagged.
  CHECK(parseval({kGold, kGold}, {untagged, kGold}).tagged);
}

TEST_CASE("parseval: tfm-score's lines", "[parseval]") {
  Corpus c;
  c.hyps = {kGold, "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (SBAR (IN on) (NP (DT the) (NN mat)))) (. .)))"};
  c.refs = {{kGold, kGold}};
  ScoreOptions o;
  o.metrics = {Metric::parseval};
  const std::vector<Result> r = score_corpus(c, o);
  REQUIRE(r.size() == 2);
  CHECK(r[0].name == "PARSEVAL");
  CHECK(r[0].signature == "evalb:collins|len:all|tags:own|version:" + signature_version());
  CHECK(r[1].signature == "evalb:collins|len:<=40|tags:own|version:" + signature_version());
  CHECK(r[0].score == Approx(90.0));
  CHECK(r[0].details == "(P = 90.00 R = 90.00 CM = 50.00 TA = 100.00 sent = 2 error = 0 skip = 0)");
  FormatOptions f;
  f.width = 2;
  // Aligned on " = ": "all" is one letter shorter than "<=40".
  CHECK(format_corpus(r, f) ==
        " PARSEVAL|evalb:collins|len:all|tags:own|version:" + signature_version() + " = 90.00 " + r[0].details +
            "\nPARSEVAL|evalb:collins|len:<=40|tags:own|version:" + signature_version() + " = 90.00 " +
            r[1].details + "\n");
  c.refs.push_back(c.refs[0]);
  CHECK_THROWS_AS(score_corpus(c, o), Error);
  CHECK(parse_metric("parseval") == Metric::parseval);
}
