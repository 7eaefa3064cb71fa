#include "libcore/eval/parseval.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "libcore/base/error.h"
#include "libcore/parse/linearize.h"
#include "libcore/parse/tree.h"

namespace tfm::eval {

namespace {

using parse::Node;
using parse::Tree;

// COLLINS.prm.
constexpr std::array<std::string_view, 7> kDeleteLabels = {"TOP", "-NONE-", ",", ":", "``", "''", "."};
constexpr std::string_view kDeleteForLength = "-NONE-";

bool is_delete_label(std::string_view label) {
  return std::find(kDeleteLabels.begin(), kDeleteLabels.end(), label) != kDeleteLabels.end();
}

// EVALB's label_comp: equal, or the pair of EQ_LABEL ADVP PRT.
bool same_label(std::string_view a, std::string_view b) {
  auto canonical = [](std::string_view l) { return l == "PRT" ? std::string_view("ADVP") : l; };
  return canonical(a) == canonical(b);
}

// EVALB's modify_label: cut at the first '-' or '=', wherever it is.
std::string_view modified_label(std::string_view label) { return label.substr(0, label.find_first_of("-=")); }

struct Bracket {
  int64_t start = 0, end = 0;  // words [start, end)
  std::string_view label;
  bool counted = true;         // false: EVALB's result 5 (deleted)
  bool matched = false;
};

struct Terminal {
  std::string_view word, tag;
};

// A tree as EVALB's read_line and massage_data leave it.
struct Reading {
  std::vector<Terminal> words;    // after the deletions
  std::vector<Bracket> brackets;
  int64_t length = 0;             // leaves but -NONE-
};

// `tags`, when given, are the POS tags of the tree's leaves in order
// (replacing the tree's own).
Reading read(const Tree& tree, const std::vector<std::string_view>* tags = nullptr) {
  Reading r;
  std::vector<size_t> open;
  size_t leaf = 0;
  for (const Node& n : tree.nodes) {
    switch (n.kind) {
      case Node::open:
        open.push_back(r.brackets.size());
        r.brackets.push_back({static_cast<int64_t>(r.words.size()), 0, n.label});
        break;
      case Node::leaf: {
        const std::string_view tag = tags != nullptr ? (*tags)[leaf] : std::string_view(n.label);
        ++leaf;
        if (tag != kDeleteForLength) ++r.length;
        if (!is_delete_label(tag)) r.words.push_back({n.word, tag});
        break;
      }
      case Node::close:
        r.brackets[open.back()].end = static_cast<int64_t>(r.words.size());
        open.pop_back();
        break;
    }
  }
  for (Bracket& b : r.brackets) {
    b.label = modified_label(b.label);
    b.counted = b.start != b.end && std::none_of(kDeleteLabels.begin(), kDeleteLabels.end(),
                                                 [&](std::string_view d) { return same_label(b.label, d); });
  }
  return r;
}

int64_t counted(const std::vector<Bracket>& brackets) {
  return std::count_if(brackets.begin(), brackets.end(), [](const Bracket& b) { return b.counted; });
}

bool crosses(const Bracket& g, const Bracket& t) {
  return (g.start < t.start && g.end > t.start && g.end < t.end) ||
         (g.start > t.start && g.start < t.end && g.end > t.end);
}

// A line parsed, or why it could not be.
struct Parsed {
  Tree tree;
  std::string error;
  bool words = false;  // a word is there, whether the brackets parse or not
};

bool is_terminator(char c) {
  return c == '(' || c == ')' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Whether `line` holds a word as EVALB's read_line finds them: a token that
// is not the label right after a '(' ("(TOP )" and a blank line hold none).
bool has_words(std::string_view line) {
  for (size_t i = 0; i < line.size();) {
    if (line[i] == '(') {
      ++i;
      while (i < line.size() && !is_terminator(line[i])) ++i;  // the label
    } else if (is_terminator(line[i])) {
      ++i;
    } else {
      return true;
    }
  }
  return false;
}

Parsed parse_line(std::string_view line) {
  Parsed p;
  p.words = has_words(line);
  try {
    p.tree = parse::parse_tree(line);
  } catch (const Error& e) {
    p.error = e.what();
  }
  return p;
}

SentenceParseval score(const Parsed& gold, const Parsed& test, bool tagged) {
  SentenceParseval s;
  auto error = [&](std::string why) {
    s.status = ParsevalStatus::error;
    s.error = std::move(why);
    return s;
  };
  Reading g;
  if (gold.error.empty()) {
    g = read(gold.tree);
    s.length = g.length;
  }
  // EVALB's first check: a test line without a word is skipped, whatever
  // else is wrong with either line.
  if (!test.words) {
    s.status = ParsevalStatus::skip;
    return s;
  }
  if (!gold.error.empty()) return error("bad gold tree: " + gold.error);
  if (!test.error.empty()) return error("bad test tree: " + test.error);
  Reading t;
  if (tagged) {
    t = read(test.tree);
  } else {
    // The gold tags, word for word (a hypothesis has no -NONE- leaves).
    std::vector<std::string_view> tags;
    for (const Node& n : gold.tree.nodes)
      if (n.kind == Node::leaf && n.label != kDeleteForLength) tags.push_back(n.label);
    const auto leaves = std::count_if(test.tree.nodes.begin(), test.tree.nodes.end(),
                                      [](const Node& n) { return n.kind == Node::leaf; });
    if (leaves == 0) {
      s.status = ParsevalStatus::skip;
      return s;
    }
    if (static_cast<size_t>(leaves) != tags.size())
      return error(fmt::format("length mismatch: {} gold words, {} test words", tags.size(), leaves));
    t = read(test.tree, &tags);
  }
  if (t.words.empty()) {
    s.status = ParsevalStatus::skip;
    return s;
  }
  if (g.words.size() != t.words.size())
    return error(fmt::format("length mismatch: {} gold words, {} test words (punctuation removed)",
                             g.words.size(), t.words.size()));
  for (size_t i = 0; i < g.words.size(); ++i)
    if (g.words[i].word != t.words[i].word)
      return error(fmt::format("words mismatch at word {}: gold '{}', test '{}'", i + 1, g.words[i].word,
                               t.words[i].word));

  s.gold_brackets = counted(g.brackets);
  s.test_brackets = counted(t.brackets);
  for (const Bracket& gb : g.brackets) {
    if (!gb.counted) continue;
    for (Bracket& tb : t.brackets)
      if (tb.counted && !tb.matched && tb.start == gb.start && tb.end == gb.end && same_label(gb.label, tb.label)) {
        tb.matched = true;
        ++s.matched;
        break;
      }
  }
  for (const Bracket& tb : t.brackets)
    if (tb.counted && std::any_of(g.brackets.begin(), g.brackets.end(),
                                  [&](const Bracket& gb) { return gb.counted && crosses(gb, tb); }))
      ++s.crossing;
  s.words = static_cast<int64_t>(g.words.size());
  if (tagged)
    for (size_t i = 0; i < g.words.size(); ++i) s.correct_tags += same_label(g.words[i].tag, t.words[i].tag);
  return s;
}

double percent(int64_t num, int64_t den) { return den > 0 ? 100.0 * static_cast<double>(num) / static_cast<double>(den) : 0.0; }

}  // namespace

void ParsevalCounts::add(const SentenceParseval& s) {
  ++sentences;
  if (s.status == ParsevalStatus::error) {
    ++errors;
    return;
  }
  if (s.status == ParsevalStatus::skip) {
    ++skipped;
    return;
  }
  gold_brackets += s.gold_brackets;
  test_brackets += s.test_brackets;
  matched += s.matched;
  complete += s.gold_brackets == s.test_brackets && s.test_brackets == s.matched;
  crossing += s.crossing;
  no_crossing += s.crossing == 0;
  two_or_less_crossing += s.crossing <= 2;
  words += s.words;
  correct_tags += s.correct_tags;
}

double ParsevalCounts::recall() const { return percent(matched, gold_brackets); }
double ParsevalCounts::precision() const { return percent(matched, test_brackets); }
double ParsevalCounts::f1() const {
  const double p = precision(), r = recall();
  return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
}
double ParsevalCounts::complete_match() const { return percent(complete, valid()); }
double ParsevalCounts::average_crossing() const {
  return valid() > 0 ? static_cast<double>(crossing) / static_cast<double>(valid()) : 0.0;
}
double ParsevalCounts::no_crossing_rate() const { return percent(no_crossing, valid()); }
double ParsevalCounts::two_or_less_crossing_rate() const { return percent(two_or_less_crossing, valid()); }
double ParsevalCounts::tagging_accuracy() const { return percent(correct_tags, words); }

SentenceParseval parseval_sentence(std::string_view gold, std::string_view test, bool tagged) {
  return score(parse_line(gold), parse_line(test), tagged);
}

ParsevalResult parseval(const std::vector<std::string>& gold, const std::vector<std::string>& test,
                        const ParsevalOptions& options) {
  TFM_REQUIRE(gold.size() == test.size(), "parseval: {} gold trees but {} test trees", gold.size(), test.size());
  std::vector<Parsed> g, t;
  for (const std::string& line : gold) g.push_back(parse_line(line));
  for (const std::string& line : test) t.push_back(parse_line(line));
  ParsevalResult result;
  result.cutoff_len = options.cutoff_len;
  if (options.tagged) {
    result.tagged = *options.tagged;
  } else {
    // Untagged when every leaf of every test tree is XX (and there is one).
    bool any_leaf = false, all_xx = true;
    for (const Parsed& p : t)
      for (const Node& n : p.tree.nodes)
        if (n.kind == Node::leaf) any_leaf = true, all_xx = all_xx && n.label == parse::kWordSymbol;
    result.tagged = !(any_leaf && all_xx);
  }
  for (size_t i = 0; i < g.size(); ++i) {
    const SentenceParseval s = score(g[i], t[i], result.tagged);
    result.all.add(s);
    if (s.length <= options.cutoff_len) result.within_cutoff.add(s);
    if (s.status == ParsevalStatus::error) result.errors.emplace_back(static_cast<int64_t>(i) + 1, s.error);
  }
  return result;
}

}  // namespace tfm::eval
