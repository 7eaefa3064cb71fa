// libcore/parse/: reading bracketed trees, cleaning them, and the
// linearization and its inverse with its repairs, on hand-made trees and
// on every tree of the Penn Treebank sample (shared/data/ptb-sample,
// read from its zip here): tree -> sequence -> tree gives the cleaned
// tree back, its POS tags XX.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "libcore/base/error.h"
#include "libcore/parse/linearize.h"
#include "libcore/parse/tree.h"
#include "libcore/parse/tree_tool.h"

#ifndef TFM_SHARED_DATA
#define TFM_SHARED_DATA "../shared/data"
#endif

using namespace tfm;
using namespace tfm::parse;

namespace {

const std::string kTreebank = TFM_SHARED_DATA "/ptb-sample/treebank.zip";

// ---- the members of a zip file (stored or deflated), enough for treebank.zip ----
uint32_t le(const std::string& s, size_t at, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(s.at(at + i));
  return v;
}

// name -> contents of every member whose name starts with `prefix` and ends with `suffix`.
std::vector<std::pair<std::string, std::string>> unzip(const std::string& path, const std::string& prefix,
                                                       const std::string& suffix) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  const std::string z((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t eocd = z.rfind(std::string("PK\x05\x06", 4));
  REQUIRE(eocd != std::string::npos);
  const uint32_t entries = le(z, eocd + 10, 2);
  size_t at = le(z, eocd + 16, 4);
  std::vector<std::pair<std::string, std::string>> out;
  for (uint32_t e = 0; e < entries; ++e) {
    REQUIRE(le(z, at, 4) == 0x02014b50);
    const uint32_t method = le(z, at + 10, 2), packed = le(z, at + 20, 4), size = le(z, at + 24, 4);
    const uint32_t name_len = le(z, at + 28, 2), extra = le(z, at + 30, 2), comment = le(z, at + 32, 2);
    const uint32_t local = le(z, at + 42, 4);
    const std::string name = z.substr(at + 46, name_len);
    at += 46 + name_len + extra + comment;
    if (name.rfind(prefix, 0) != 0 || name.size() < suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const size_t data = local + 30 + le(z, local + 26, 2) + le(z, local + 28, 2);
    std::string text(size, '\0');
    if (method == 0) {
      text = z.substr(data, size);
    } else {
      REQUIRE(method == 8);
      z_stream s{};
      REQUIRE(inflateInit2(&s, -15) == Z_OK);
      s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(z.data() + data));
      s.avail_in = packed;
      s.next_out = reinterpret_cast<Bytef*>(text.data());
      s.avail_out = size;
      const int rc = inflate(&s, Z_FINISH);
      inflateEnd(&s);
      REQUIRE(rc == Z_STREAM_END);
    }
    out.emplace_back(name, std::move(text));
  }
  return out;
}

// A file in the test's temporary folder, removed with it.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "tfm-tree-test-XXXXXX").string();
    REQUIRE(mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = (path / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
};

std::vector<Tree> read_all(const std::string& path) {
  TreeReader r(path);
  std::vector<Tree> trees;
  Tree t;
  while (r.next(t)) trees.push_back(t);
  return trees;
}

template <typename F>
void expect_error(F f, const std::string& what, const std::string& where = {}) {
  try {
    f();
    FAIL("no error; expected: " << what);
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains(what));
    CHECK(e.where() == where);
  }
}

}  // namespace

TEST_CASE("tree: reading and writing one line", "[tree]") {
  const std::string line = "(TOP (S (NP (NNP John)) (VP (VBZ runs)) (. .)))";
  const Tree t = parse_tree("  (TOP (S\n(NP (NNP John) )(VP (VBZ runs))(. .)) )  ");
  CHECK(format_tree(t) == line);
  CHECK(format_tree(parse_tree(line)) == line);
  CHECK(tree_sentence(t) == "John runs .");
  CHECK(tree_words(t) == std::vector<std::string>{"John", "runs", "."});
  CHECK(parse_tree("").empty());
  CHECK(parse_tree(" \t ").empty());
  CHECK(format_tree(parse_tree("( (S (NN x)) )")) == "( (S (NN x)))");
  CHECK(format_tree(parse_tree("(NN x)")) == "(NN x)");

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"(S (NN x)", "unbalanced brackets: 1 left open"},
      {"(S (NN x)))", "a ')' that closes nothing"},
      {"(S (NN x)) (S (NN y))", "more than one tree"},
      {"(S)", "an empty bracket: (S)"},
      {"(S ())", "an empty bracket: ()"},
      {"(NN x y)", "holds a second word: y"},
      {"(NN x (NN y))", "holds a subtree after its word"},
      {"(S x (NN y))", "holds a subtree after its word"},
      {"(S (NN y) x)", "a word beside a subtree: x"},
      {"x (S (NN y))", "a word outside brackets: x"},
  };
  for (const auto& [text, what] : bad) {
    INFO(text);
    expect_error([&] { parse_tree(text); }, what);
  }
  // Deep nesting is not recursion.
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "(X ";
  deep += "(NN x)";
  deep += std::string(100000, ')');
  CHECK(tree_words(parse_tree(deep)).size() == 1);
  expect_error([&] { parse_tree(std::string(100000, '(')); }, "unbalanced brackets: 100000 left open");
}

TEST_CASE("tree: a file of trees in any layout, errors at FILE:LINE", "[tree]") {
  TempDir dir;
  const std::string two = dir.write("two.mrg", "\n( (S \n    (NP (NN a) )\n  (VP (VB b) )) )\n( (NP (NN c)) ) ( (NP (NN d)) )\n");
  TreeReader r(two);
  Tree t;
  REQUIRE(r.next(t));
  CHECK(format_tree(t) == "( (S (NP (NN a)) (VP (VB b))))");
  CHECK(r.line_number() == 2);
  REQUIRE(r.next(t));
  CHECK(format_tree(t) == "( (NP (NN c)))");
  CHECK(r.line_number() == 5);
  REQUIRE(r.next(t));
  CHECK(r.line_number() == 5);
  CHECK_FALSE(r.next(t));

  const std::string open = dir.write("open.mrg", "(S (NN a))\n(S\n (NN b)\n");
  expect_error([&] { read_all(open); }, "the tree that starts on line 2 has 1 left open", open + ":3");
  const std::string word = dir.write("word.mrg", "(S (NN a))\n(S (NN a b))\n");
  expect_error([&] { read_all(word); }, "holds a second word", word + ":2");
  expect_error([&] { read_all((dir.path / "missing").string()); }, "cannot open");
}

TEST_CASE("tree: cleaning as parsing papers do", "[tree]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // Function tags and indices go; POS tags stay; the root becomes TOP.
      {"( (S (NP-SBJ-1 (NNP John)) (VP (VBZ runs) (ADVP-TMP=2 (RB now))) (. .)) )",
       "(TOP (S (NP (NNP John)) (VP (VBZ runs) (ADVP (RB now))) (. .)))"},
      // -NONE- leaves and the constituents they leave empty, recursively.
      {"( (S (NP-SBJ (-NONE- *-1)) (VP (VBD said) (SBAR (-NONE- 0) (S (-NONE- *T*-2)))) (. .)) )",
       "(TOP (S (VP (VBD said)) (. .)))"},
      // Alternatives: the first; labels that start with '-' stay whole.
      {"( (S (ADVP|PRT (RB up)) (-LRB- -LRB-)) )", "(TOP (S (ADVP (RB up)) (-LRB- -LRB-)))"},
      // A labelled root goes under TOP; a TOP root stays.
      {"(S (NN x))", "(TOP (S (NN x)))"},
      {"(TOP (S (NN x)))", "(TOP (S (NN x)))"},
      {"(NN x)", "(TOP (NN x))"},
      {"( (S (NN x)) (. .))", "(TOP (S (NN x)) (. .))"},
      // Nothing left: the empty tree.
      {"( (S (-NONE- *)) )", ""},
  };
  for (const auto& [raw, clean] : cases) {
    INFO(raw);
    const Tree t = clean_tree(parse_tree(raw));
    CHECK(format_tree(t) == clean);
    CHECK(format_tree(clean_tree(t)) == clean);  // idempotent
  }
  CHECK(bare_label("NP-SBJ-1") == "NP");
  CHECK(bare_label("-NONE-") == "-NONE-");
  CHECK(bare_label("") == "");
  CHECK(format_tree(retag(parse_tree("(S (NN x) (. .))"), "XX")) == "(S (XX x) (XX .))");
}

TEST_CASE("tree: linearization and its inverse", "[tree]") {
  const Tree t = parse_tree("(TOP (S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .)))");
  const std::string seq = "(S (NP XX )NP (VP XX (NP XX XX )NP )VP XX )S";
  CHECK(linearize(t) == seq);
  const std::vector<std::string> words = tree_words(t);
  Repairs none;
  CHECK(format_tree(delinearize(seq, words, &none)) == format_tree(retag(t, kWordSymbol)));
  CHECK_FALSE(none.any());
  // Several top-level constituents; a root other than TOP stays.
  CHECK(linearize(parse_tree("(TOP (S (NN a)) (. .))")) == "(S XX )S XX");
  CHECK(linearize(parse_tree("(S (NN a))")) == "(S XX )S");
  CHECK(format_tree(delinearize("(S XX )S XX", std::vector<std::string>{"a", "."})) == "(TOP (S (XX a)) (XX .))");

  struct Repair {
    const char* name;
    std::string sequence;
    std::vector<std::string> words;
    std::string tree;
    Repairs want;
  };
  const std::vector<Repair> repairs = {
      {"closers missing at the end", "(S (NP XX )NP (VP XX", {"a", "b"},
       "(TOP (S (NP (XX a)) (VP (XX b))))", {0, 2, 0, 0, 0}},
      {"a closer with nothing open", "(S XX )S )NP XX", {"a", "b"}, "(TOP (S (XX a)) (XX b))", {1, 0, 0, 0, 0}},
      {"closer labels are not checked", "(S (NP XX )VP XX )NP", {"a", "b"}, "(TOP (S (NP (XX a)) (XX b)))",
       {0, 0, 0, 0, 0}},
      {"too few words: added to the last top-level constituent", "(S (NP XX )NP )S", {"a", "b", "c"},
       "(TOP (S (NP (XX a)) (XX b) (XX c)))", {0, 0, 2, 0, 0}},
      {"too few words, a word last at top level", "(S XX )S XX", {"a", "b", "c"},
       "(TOP (S (XX a)) (XX b) (XX c))", {0, 0, 1, 0, 0}},
      {"too many words: the last dropped, and the constituent left empty", "(S (NP XX XX )NP (VP XX )VP )S",
       {"a", "b"}, "(TOP (S (NP (XX a) (XX b))))", {0, 0, 0, 1, 1}},
      {"empty constituents", "(S (NP )NP XX (VP (ADVP )ADVP )VP )S", {"a"}, "(TOP (S (XX a)))", {0, 0, 0, 0, 3}},
      {"nothing but words", "", {"a", "b"}, "(TOP (XX a) (XX b))", {0, 0, 2, 0, 0}},
      {"no words", "(S XX )S", {}, "", {0, 0, 0, 1, 1}},
      {"any other token is a word's place", "(S . dog ( )S", {"a", "b", "c"}, "(TOP (S (XX a) (XX b) (XX c)))",
       {0, 0, 0, 0, 0}},
  };
  for (const Repair& r : repairs) {
    INFO(r.name << ": " << r.sequence);
    Repairs got;
    CHECK(format_tree(delinearize(r.sequence, r.words, &got)) == r.tree);
    CHECK(got.closers_dropped == r.want.closers_dropped);
    CHECK(got.closers_added == r.want.closers_added);
    CHECK(got.words_added == r.want.words_added);
    CHECK(got.words_dropped == r.want.words_dropped);
    CHECK(got.constituents_dropped == r.want.constituents_dropped);
  }
}

TEST_CASE("tree: every tree of the PTB sample, cleaned, round trip", "[tree][ptb]") {
  const auto members = unzip(kTreebank, "treebank/combined/wsj_", ".mrg");
  REQUIRE(members.size() == 199);
  std::string all;
  for (const auto& [name, text] : members) all += text;
  TempDir dir;
  const std::vector<Tree> trees = read_all(dir.write("all.mrg", all));
  REQUIRE(trees.size() == 3914);

  // The first tree of wsj_0001, by hand.
  const Tree first = clean_tree(trees[0]);
  CHECK(format_tree(first) ==
        "(TOP (S (NP (NP (NNP Pierre) (NNP Vinken)) (, ,) (ADJP (NP (CD 61) (NNS years)) (JJ old)) (, ,)) "
        "(VP (MD will) (VP (VB join) (NP (DT the) (NN board)) (PP (IN as) (NP (DT a) (JJ nonexecutive) "
        "(NN director))) (NP (NNP Nov.) (CD 29)))) (. .)))");
  CHECK(linearize(first) ==
        "(S (NP (NP XX XX )NP XX (ADJP (NP XX XX )NP XX )ADJP XX )NP (VP XX (VP XX (NP XX XX )NP (PP XX "
        "(NP XX XX XX )NP )PP (NP XX XX )NP )VP )VP XX )S");

  int64_t failures = 0, words = 0;
  for (size_t i = 0; i < trees.size(); ++i) {
    const Tree clean = clean_tree(trees[i]);
    const std::string line = format_tree(clean);
    std::vector<std::string> problems;
    if (clean.empty()) problems.push_back("nothing left");
    if (clean.nodes.front().label != kRootLabel) problems.push_back("root not TOP");
    for (const Node& n : clean.nodes) {
      if (n.kind == Node::leaf && n.label == kEmptyTag) problems.push_back("a -NONE- leaf");
      if (n.kind == Node::open && bare_label(n.label) != n.label) problems.push_back("a function tag: " + n.label);
    }
    Tree copy = clean;
    if (remove_empty_constituents(copy) != 0) problems.push_back("an empty constituent");
    if (format_tree(parse_tree(line)) != line) problems.push_back("format/parse differ");
    if (format_tree(clean_tree(clean)) != line) problems.push_back("cleaning twice differs");
    // The words are the raw tree's but the empty elements'.
    std::vector<std::string> raw_words;
    for (const Node& n : trees[i].nodes)
      if (n.kind == Node::leaf && n.label != kEmptyTag) raw_words.push_back(n.word);
    if (tree_words(clean) != raw_words) problems.push_back("words differ from the raw tree's");
    Repairs r;
    const Tree back = delinearize(linearize(clean), tree_words(clean), &r);
    if (r.any()) problems.push_back("delinearize repaired");
    if (format_tree(back) != format_tree(retag(clean, kWordSymbol))) problems.push_back("round trip differs");
    words += static_cast<int64_t>(raw_words.size());
    if (!problems.empty() && ++failures <= 5) {
      std::string all_problems;
      for (const std::string& p : problems) all_problems += p + "; ";
      UNSCOPED_INFO("tree " << i + 1 << ": " << all_problems << line);
    }
  }
  CHECK(failures == 0);
  CHECK(words == 94084);
}

TEST_CASE("tree: tfm-tree's filters", "[tree]") {
  TempDir dir;
  const std::string mrg = dir.write("a.mrg", "( (S (NP-SBJ (-NONE- *)) (VP (VB Go)) (. .)) )\n( (S (-NONE- *)) )\n");
  const std::string out = (dir.path / "out").string();
  auto run = [&](TreeToolOptions o) {
    std::FILE* f = std::fopen(out.c_str(), "w");
    REQUIRE(f != nullptr);
    TreeToolTotals t;
    try {
      t = run_tree_tool(o, f);
    } catch (...) {
      std::fclose(f);
      throw;
    }
    std::fclose(f);
    std::ifstream in(out);
    std::stringstream s;
    s << in.rdbuf();
    return std::make_pair(t, s.str());
  };
  auto [clean, trees] = run({TreeCommand::clean, {mrg}, {}});
  CHECK(trees == "(TOP (S (VP (VB Go)) (. .)))\n");
  CHECK(clean.trees == 2);
  CHECK(clean.dropped == 1);
  CHECK(tree_tool_report({TreeCommand::clean, {}, {}}, clean) == "2 trees cleaned, 1 left out (no word left)");
  const std::string clean_file = dir.write("clean.trees", trees);
  CHECK(run({TreeCommand::words, {clean_file}, {}}).second == "Go .\n");
  CHECK(run({TreeCommand::linearize, {clean_file}, {}}).second == "(S (VP XX )VP XX )S\n");

  const std::string seqs = dir.write("seq", "(S (VP XX )VP XX )S\n(S XX\n");
  const std::string words = dir.write("words", "Go .\nHe left\n");
  auto [d, dtrees] = run({TreeCommand::delinearize, {seqs}, words});
  CHECK(dtrees == "(TOP (S (VP (XX Go)) (XX .)))\n(TOP (S (XX He) (XX left)))\n");
  CHECK(d.trees == 2);
  CHECK(d.repaired == 1);
  CHECK(tree_tool_report({TreeCommand::delinearize, {}, {}}, d) ==
        "2 trees, 1 repaired: 1 closing brackets added, 1 words added");
  const std::string one = dir.write("one", "Go .\n");
  expect_error([&] { run({TreeCommand::delinearize, {seqs}, one}); }, "2 sequences but 1 sentences");
  expect_error([&] { run({TreeCommand::delinearize, {seqs}, {}}); }, "--words");
}
