// libcore/eval: sacreBLEU's tokenizers on hand-made cases, BLEU, chrF and
// TER on small hand-computed examples, every literal vector of sacreBLEU's
// own tests (shared/data/sacrebleu-tests/api-examples/expected_vectors.json)
// and the WMT17 scores of mteval-v13a.pl and chrF++.py (expected_scores.tsv).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "libcore/base/error.h"
#include "libcore/eval/paper_bleu.h"
#include "libcore/eval/score.h"
#include "libcore/eval/unicode.h"

#ifndef TFM_SHARED_DATA
#define TFM_SHARED_DATA "../shared/data"
#endif

using namespace tfm;
using namespace tfm::eval;

namespace {

const std::string kVectors = TFM_SHARED_DATA "/sacrebleu-tests/api-examples/expected_vectors.json";
const std::string kWmt = TFM_SHARED_DATA "/sacrebleu-tests/wmt17-newstest2017-en-de";

// ---- a minimal JSON reader: enough for expected_vectors.json ----
struct Json {
  enum Kind { null, boolean, number, string, array, object } kind = null;
  double num = 0;
  bool b = false;
  std::string str;
  std::vector<Json> items;
  std::map<std::string, Json> members;

  const Json& operator[](const std::string& k) const {
    const auto it = members.find(k);
    if (it == members.end()) throw Error("JSON: no key " + k);
    return it->second;
  }
  const Json& operator[](size_t i) const { return items.at(i); }
  bool has(const std::string& k) const { return members.count(k) > 0; }
  std::vector<std::string> strings() const {
    std::vector<std::string> out;
    for (const Json& j : items) out.push_back(j.str);
    return out;
  }
};

class JsonParser {
 public:
  explicit JsonParser(std::string text) : s_(std::move(text)) {}
  Json parse() {
    Json j = value();
    space();
    TFM_REQUIRE(i_ == s_.size(), "JSON: trailing text at {}", i_);
    return j;
  }

 private:
  void space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    space();
    TFM_REQUIRE(i_ < s_.size() && s_[i_] == c, "JSON: expected '{}' at {}", c, i_);
    ++i_;
  }
  std::string text() {
    expect('"');
    std::string out;
    while (s_.at(i_) != '"') {
      char c = s_[i_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      c = s_.at(i_++);
      switch (c) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          char32_t cp = static_cast<char32_t>(std::stoul(s_.substr(i_, 4), nullptr, 16));
          i_ += 4;
          if (cp >= 0xD800 && cp < 0xDC00) {  // a surrogate pair
            const char32_t low = static_cast<char32_t>(std::stoul(s_.substr(i_ + 2, 4), nullptr, 16));
            i_ += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(cp, out);
          break;
        }
        default: out += c;
      }
    }
    ++i_;
    return out;
  }
  Json value() {
    space();
    Json j;
    const char c = s_.at(i_);
    if (c == '{') {
      j.kind = Json::object;
      ++i_;
      space();
      if (s_.at(i_) == '}') return ++i_, j;
      do {
        std::string k = text();
        expect(':');
        j.members[k] = value();
        space();
      } while (s_.at(i_++) == ',');
    } else if (c == '[') {
      j.kind = Json::array;
      ++i_;
      space();
      if (s_.at(i_) == ']') return ++i_, j;
      do {
        j.items.push_back(value());
        space();
      } while (s_.at(i_++) == ',');
    } else if (c == '"') {
      j.kind = Json::string;
      j.str = text();
    } else if (s_.compare(i_, 4, "null") == 0) {
      i_ += 4;
    } else if (s_.compare(i_, 4, "true") == 0 || s_.compare(i_, 5, "false") == 0) {
      j.kind = Json::boolean;
      j.b = c == 't';
      i_ += j.b ? 4 : 5;
    } else {
      j.kind = Json::number;
      size_t used = 0;
      j.num = std::stod(s_.substr(i_, 40), &used);
      i_ += used;
    }
    return j;
  }
  std::string s_;
  size_t i_ = 0;
};

const Json& vectors() {
  static const Json j = [] {
    std::ifstream in(kVectors);
    if (!in) throw Error("cannot read " + kVectors);
    std::stringstream ss;
    ss << in.rdbuf();
    return JsonParser(ss.str()).parse();
  }();
  return j;
}

// The group whose key starts with `prefix` (keys carry their settings).
const Json& group(const std::string& prefix) {
  for (const auto& [k, v] : vectors().members)
    if (k.rfind(prefix, 0) == 0) return v;
  throw Error("no group " + prefix);
}

std::vector<std::vector<std::string>> streams(const Json& refs) {
  std::vector<std::vector<std::string>> out;
  for (const Json& r : refs.items) out.push_back(r.strings());
  return out;
}

double corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                   const BleuOptions& o) {
  BleuStats sum(o.max_order);
  for (const BleuStats& s : bleu_corpus_stats(hyps, refs, o)) sum += s;
  return compute_bleu(sum, o).score;
}

double corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                   const ChrfOptions& o) {
  return chrf_score(sum_chrf_stats(chrf_corpus_stats(hyps, refs, o), o), o);
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string_view> v;
  split_words(s, v);
  return {v.begin(), v.end()};
}

Symbols ids(const std::string& s, std::map<std::string, uint32_t>& vocab) {
  Symbols out;
  for (const std::string& w : words(s)) out.push_back(vocab.emplace(w, vocab.size()).first->second);
  return out;
}

}  // namespace

TEST_CASE("eval: Python's whitespace, rstrip and lowercase", "[eval]") {
  CHECK(words("a\u00a0b\u3000c\x1c" "d\te  f") == std::vector<std::string>{"a", "b", "c", "d", "e", "f"});
  CHECK(rstrip("x \u2009\r\u00a0") == "x");
  CHECK(rstrip("x\ufeff") == "x\ufeff");  // a BOM is not whitespace
  CHECK(py_lower_utf8("ABC Straße") == "abc straße");
  CHECK(py_lower_utf8("ΟΔΟΣ ΣΑΣ.") == "οδος σας.");  // final sigma
  CHECK(py_lower_utf8("Σ") == "σ");
  CHECK(py_lower_utf8("İ") == "i\u0307");
  CHECK(py_lower_utf8("ǅ") == "ǆ");
  CHECK(is_punct(U'«'));
  CHECK(is_symbol(U'€'));
  CHECK(is_number(U'½'));
  CHECK_FALSE(is_number(U'a'));
  CHECK(std::string(unicode_version()) == "14.0.0");
  std::u32string out;
  CHECK_FALSE(decode_utf8("\xc0\xaf", out));   // overlong
  CHECK_FALSE(decode_utf8("\xed\xa0\x80", out));  // surrogate
  CHECK_FALSE(valid_utf8("ab\xe2\x82"));       // truncated
  CHECK(valid_utf8("a€😀"));
}

TEST_CASE("eval: sacreBLEU's tokenizers on hand-made cases", "[eval]") {
  CHECK(tokenize_13a("Hello, world! It's 3.14 and 1,000 items.") ==
        "Hello , world ! It's 3.14 and 1,000 items .");
  CHECK(tokenize_13a("a&quot;b&amp;lt; <skipped>x 5-3 (x)") == "a \" b < x 5 - 3 ( x )");
  CHECK(tokenize_13a("end.") == "end .");
  CHECK(tokenize_13a(".5 x,y") == ". 5 x , y");
  CHECK(tokenize_13a("„Hallo“ sagte er…") == "„Hallo“ sagte er…");  // only ASCII punctuation
  CHECK(tokenize_intl("„Hallo“ sagte er… 3.14, 2020.") == "„ Hallo “ sagte er … 3.14 , 2020.");
  CHECK(tokenize_intl("Preis: 5€ (ca.)") == "Preis : 5 € ( ca . )");
  CHECK(tokenize_chars("ab c\u00a0d") == "a b c d");
  CHECK(tokenize("  a   b ", Tokenizer::none) == "  a   b ");
  CHECK(parse_tokenizer("char") == Tokenizer::chars);
  CHECK_THROWS_WITH(parse_tokenizer("zh"), Catch::Contains("unknown tokenizer 'zh'"));
  CHECK(normalize_ter("The  Cat's (bowl).", {}) == "the cat's (bowl).");
  CHECK(normalize_ter("The Cat's (bowl).", {.normalized = true}) == "the cat 's ( bowl ) .");
  CHECK(normalize_ter("The Cat, (bowl).", {.case_sensitive = true, .no_punct = true}) == "The Cat bowl");
}

TEST_CASE("eval: tokenizer.perl -l de and the ##AT## split", "[eval]") {
  CHECK(moses_tokenize_de("Das ist z.B. ein Test.") == "Das ist z.B. ein Test .");
  CHECK(moses_tokenize_de("Peter's \"Haus\" [1] & <b>|") ==
        "Peter &apos; s &quot; Haus &quot; &#91; 1 &#93; &amp; &lt; b &gt; &#124;");
  CHECK(moses_tokenize_de("Am 3. Oktober kam Nr. 5 ... oder Dr. Who.") ==
        "Am 3. Oktober kam Nr. 5 ... oder Dr. Who .");
  CHECK(moses_tokenize_de("Er sagte: Nein. Dann ging er.") == "Er sagte : Nein . Dann ging er .");
  CHECK(moses_tokenize_de("1,5 Mio, a,b, 5,") == "1,5 Mio , a , b , 5 ,");
  CHECK(moses_tokenize_de("Das Ende Nr.") == "Das Ende Nr .");  // the last word always splits
  CHECK(moses_tokenize_de("U.S.-Regierung und E-Mail-Adresse") == "U.S.-Regierung und E-Mail-Adresse");
  CHECK(moses_tokenize_de("  ") == "  ");
  CHECK(split_compounds("U.S.-Regierung und E-Mail-Adresse - x") ==
        "U.S. ##AT##-##AT## Regierung und E ##AT##-##AT## Mail ##AT##-##AT## Adresse - x");
}

TEST_CASE("eval: BLEU on a hand-computed example", "[eval]") {
  // hyp "the the cat sat" vs ref "the cat sat down": clipped unigrams 3/4
  // ("the" twice, once in the ref), bigrams 2/3, trigrams 1/2, 4-grams 0/1.
  const std::vector<std::string> refs = {"the cat sat down"};
  const BleuStats s = bleu_segment_stats("the the cat sat", refs, 4);
  CHECK(s.correct == std::vector<int64_t>{3, 2, 1, 0});
  CHECK(s.total == std::vector<int64_t>{4, 3, 2, 1});
  BleuOptions o;
  const BleuScore b = compute_bleu(s, o);  // exp: 4-gram precision 100 / (2 * 1)
  CHECK(b.precisions[3] == 50.0);
  CHECK(b.score == Approx(std::exp((std::log(75.0) + std::log(200.0 / 3) + std::log(50.0) + std::log(50.0)) / 4)));
  o.smooth = Smoothing::none;
  CHECK(compute_bleu(s, o).score < 1e-100);
  o.smooth = Smoothing::floor;
  CHECK(compute_bleu(s, o).precisions[3] == Approx(10.0));
  // Two references: the larger count of each n-gram and the closest length.
  const std::vector<std::string> two = {"the cat", "the the cat sat here"};
  const BleuStats m = bleu_segment_stats("the the cat sat", two, 4);
  CHECK(m.correct == std::vector<int64_t>{4, 3, 2, 1});
  CHECK(m.ref_len == 5);
  CHECK(bleu_signature(BleuOptions{.smooth = Smoothing::add_k}, 2, "v") ==
        "nrefs:2|case:mixed|eff:no|tok:13a|smooth:add-k[1.00]|version:v");
}

TEST_CASE("eval: chrF and TER on hand-computed examples", "[eval]") {
  // chrF of "ab" against "ab": every order that exists matches.
  ChrfOptions c;
  CHECK(corpus_chrf({"ab"}, {{"ab"}}, c) == 100.0);
  // "aa" vs "ab": unigrams 1/2 precision and recall, bigrams 0: effective
  // order averages orders 1-2 to P = R = 0.25.
  CHECK(corpus_chrf({"aa"}, {{"ab"}}, c) == Approx(25.0));
  CHECK(chrf_name(ChrfOptions{.word_order = 2}) == "chrF2++");
  // TER: one shift of a block is one edit.
  std::map<std::string, uint32_t> v;
  CHECK(translation_edits(ids("c d a b", v), ids("a b c d", v)) == 1);
  CHECK(translation_edits(ids("a x c", v), ids("a b c", v)) == 1);
  CHECK(translation_edits(ids("", v), ids("a b c", v)) == 3);
  CHECK(translation_edits(ids("a b", v), ids("", v)) == 2);
  CHECK(ter_score({{1, 4.0}, {2, 4.0}}) == Approx(37.5));
  CHECK(ter_score({{2, 0.0}}) == 100.0);
  CHECK(ter_score({{0, 0.0}}) == 0.0);
}

TEST_CASE("eval: sacreBLEU's corpus BLEU vectors", "[eval][vectors]") {
  for (const Json& t : group("corpus_bleu (tol").items) {
    BleuOptions o;
    if (t["kwargs"].has("tokenize")) o.tokenize = parse_tokenizer(t["kwargs"]["tokenize"].str);
    if (t["kwargs"].has("smooth_method")) o.smooth = parse_smoothing(t["kwargs"]["smooth_method"].str);
    INFO(t["hyps"][0].str);
    CHECK(corpus_bleu(t["hyps"].strings(), streams(t["refs"]), o) == Approx(t["expected"].num).margin(1e-6));
  }
  for (const Json& t : group("corpus_bleu_max_ngram_order").items) {
    const BleuOptions o{.max_order = static_cast<int>(t["max_ngram_order"].num)};
    CHECK(fmt::format("{:.2f}", corpus_bleu(t["hyps"].strings(), streams(t["refs"]), o)) == t["expected_2dp"].str);
  }
  const BleuOptions raw{.tokenize = Tokenizer::none, .smooth = Smoothing::floor, .smooth_value = 0.01,
                        .effective_order = true};
  for (const Json& t : group("raw_corpus_bleu (tok").items)
    CHECK(corpus_bleu(t["hyps"].strings(), streams(t["refs"]), raw) / 100 ==
          Approx(t["expected_0_1"].num).margin(1e-8));
  for (const Json& t : group("raw_corpus_bleu offset").items) {
    BleuOptions o = raw;
    o.smooth_value = 0.1;
    CHECK(corpus_bleu(t["hyps"].strings(), streams(t["refs"]), o) / 100 == Approx(t["floor_0.1"].num).margin(1e-8));
    o.smooth_value = 0.0;
    CHECK(corpus_bleu(t["hyps"].strings(), streams(t["refs"]), o) / 100 == Approx(t["floor_0.0"].num).margin(1e-8));
  }
  for (const Json& t : group("raw_corpus_bleu statistics").items) {
    const BleuStats s = bleu_corpus_stats(t["hyps"].strings(), streams(t["refs"]), raw)[0];
    for (int n = 0; n < 4; ++n) {
      CHECK(s.correct[n] == t["counts"][n].num);
      CHECK(s.total[n] == t["totals"][n].num);
    }
  }
  const auto from_stats = [](const Json& t, const BleuOptions& o) {
    BleuStats s(4);
    s.sys_len = static_cast<int64_t>(t["sys_len"].num);
    s.ref_len = static_cast<int64_t>(t["ref_len"].num);
    for (int n = 0; n < 4; ++n) {
      s.correct[n] = static_cast<int64_t>(t["counts"][n].num);
      s.total[n] = static_cast<int64_t>(t["totals"][n].num);
    }
    return compute_bleu(s, o).score / 100;
  };
  for (const Json& t : group("BLEU.compute_bleu").items)
    CHECK(from_stats(t, BleuOptions{.smooth = Smoothing::none}) == Approx(t["expected_0_1"].num).margin(1e-10));
  for (const Json& t : group("compute_bleu degenerate").items)
    CHECK(from_stats(t, BleuOptions{.smooth = Smoothing::floor, .smooth_value = t["floor_value"].num}) ==
          t["expected_0_1"].num);
}

TEST_CASE("eval: sacreBLEU's sentence BLEU vectors", "[eval][vectors]") {
  for (const char* name : {"sentence_bleu (eff", "sentence_bleu zero"}) {
    const Json& g = group(name);
    for (const Json& c : g["cases"].items) {
      BleuOptions o{.tokenize = parse_tokenizer(c["tokenize"].str), .lowercase = c["lowercase"].b,
                    .smooth = parse_smoothing(c["smooth_method"].str), .effective_order = true};
      if (c["smooth_value"].kind == Json::number) o.smooth_value = c["smooth_value"].num;
      INFO(c["smooth_method"].str << " " << c["tokenize"].str);
      CHECK(corpus_bleu({g["hyp"].str}, {{g["ref"].str}}, o) == Approx(c["expected"].num).margin(1e-3));
    }
  }
}

TEST_CASE("eval: sacreBLEU's chrF vectors", "[eval][vectors]") {
  const auto check = [](const std::string& name, const ChrfOptions& o, double tol) {
    for (const Json& t : group(name).items) {
      INFO(name << ": " << t[0][0].str);
      CHECK(corpus_chrf(t[0].strings(), {t[1].strings()}, o) == Approx(t[2].num).margin(tol));
    }
  };
  check("chrF corpus (char_order=6, word_order=0, beta=3, eps", ChrfOptions{.beta = 3, .eps_smoothing = true}, 1e-4);
  check("chrF corpus (eps_smoothing=False", ChrfOptions{}, 1e-4);
  check("chrF corpus (remove_whitespace=False)", ChrfOptions{.beta = 3, .whitespace = true}, 1e-6);
  for (const Json& t : group("chrF sentence").items)
    CHECK(corpus_chrf({t[0].str}, {t[1].strings()}, ChrfOptions{.eps_smoothing = true}) == Approx(t[2].num).margin(1e-6));
}

TEST_CASE("eval: WMT17 en-de: mteval-v13a BLEU and chrF++.py", "[eval][wmt17]") {
  std::ifstream tsv(kWmt + "/expected_scores.tsv");
  REQUIRE(tsv.good());
  std::string line;
  std::getline(tsv, line);
  const Corpus ref = read_corpus(kWmt + "/newstest2017-ende-ref.de", {});
  int systems = 0;
  while (std::getline(tsv, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, '\t');) f.push_back(x);
    REQUIRE(f.size() == 11);
    INFO(f[0]);
    const Corpus c = read_corpus(kWmt + "/" + f[0], {kWmt + "/newstest2017-ende-ref.de"});
    BleuStats sum(4);
    for (const BleuStats& s : bleu_corpus_stats(c.hyps, c.refs, BleuOptions{})) sum += s;
    const BleuScore b = compute_bleu(sum, BleuOptions{});
    CHECK(fmt::format("{:.2f}", b.score) == fmt::format("{:.2f}", std::stod(f[1])));  // mteval-v13a.pl, as sacreBLEU checks it
    CHECK(fmt::format("{:.4f}", b.score) == f[4]);
    CHECK(b.sys_len == std::stoll(f[7]));
    CHECK(b.ref_len == std::stoll(f[8]));
    CHECK(fmt::format("{},{},{},{}", sum.correct[0], sum.correct[1], sum.correct[2], sum.correct[3]) == f[9]);
    CHECK(fmt::format("{},{},{},{}", sum.total[0], sum.total[1], sum.total[2], sum.total[3]) == f[10]);
    CHECK(fmt::format("{:.4f}", corpus_bleu(c.hyps, c.refs, BleuOptions{.lowercase = true})) == f[5]);
    CHECK(fmt::format("{:.4f}", corpus_bleu(c.hyps, c.refs, BleuOptions{.tokenize = Tokenizer::none})) == f[6]);
    if (!f[2].empty()) {  // chrF++.py, sacreBLEU --chrf-eps-smoothing
      CHECK(corpus_chrf(c.hyps, c.refs, ChrfOptions{.eps_smoothing = true}) == Approx(std::stod(f[2])).margin(1e-4));
      CHECK(corpus_chrf(c.hyps, c.refs, ChrfOptions{.word_order = 2, .eps_smoothing = true}) ==
            Approx(std::stod(f[3])).margin(1e-4));
    }
    ++systems;
  }
  CHECK(systems == 16);
  CHECK(ref.hyps.size() == 3004);
}

TEST_CASE("eval: reading a corpus: counts, UTF-8, names", "[eval]") {
  CHECK_THROWS_WITH(read_corpus(kWmt + "/nope", {}), Catch::Contains("nope"));
  CHECK(parse_metric("ter") == Metric::ter);
  CHECK_THROWS_WITH(parse_metric("meteor"), Catch::Contains("unknown metric 'meteor'"));
  CHECK_THROWS_WITH(parse_smoothing("laplace"), Catch::Contains("unknown smoothing method"));
  CHECK(signature_version().rfind("tfm-", 0) == 0);
}
