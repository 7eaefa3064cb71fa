#include "libcore/parse/tree.h"

#include <deque>
#include <utility>

#include "libcore/base/error.h"
#include "libcore/data/line_reader.h"

namespace tfm::parse {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// A word or label as it appears in a message: at most 40 bytes of it.
std::string shown(std::string_view s) {
  return s.size() <= 40 ? std::string(s) : std::string(s.substr(0, 37)) + "...";
}

// Builds trees from tokens ('(', ')' and symbols) fed one at a time, by the
// grammar of tree.h. A tree is complete when its brackets balance; feed()
// throws Error (no position: the caller adds it) on the first token that
// breaks the grammar.
class Builder {
 public:
  // Each returns true when the token completed a tree (then take() it).
  bool open_paren() {
    if (state_ == State::labelled) push_open(std::move(label_));
    else if (state_ == State::opened) push_open({});
    else if (state_ == State::word) fail("the bracket ({} {} holds a subtree after its word", shown(label_), shown(word_));
    ++depth_;
    state_ = State::opened;
    return false;
  }
  bool close_paren() {
    switch (state_) {
      case State::opened: fail("an empty bracket: ()");
      case State::labelled: fail("an empty bracket: ({})", shown(label_));
      case State::word:
        tree_.nodes.push_back({Node::leaf, std::move(label_), std::move(word_)});
        label_.clear(), word_.clear();
        break;
      case State::idle:
        if (depth_ == 0) fail("a ')' that closes nothing");
        tree_.nodes.push_back({Node::close, {}, {}});
        break;
    }
    state_ = State::idle;
    return --depth_ == 0;
  }
  bool symbol(std::string_view s) {
    switch (state_) {
      case State::opened: label_ = s, state_ = State::labelled; break;
      case State::labelled: word_ = s, state_ = State::word; break;
      case State::word: fail("the bracket ({} {} holds a second word: {}", shown(label_), shown(word_), shown(s));
      case State::idle:
        if (depth_ == 0) fail("a word outside brackets: {}", shown(s));
        fail("a word beside a subtree: {}", shown(s));
    }
    return false;
  }
  Tree take() { return std::exchange(tree_, Tree{}); }
  int64_t depth() const { return depth_; }

 private:
  enum class State { idle, opened, labelled, word };
  void push_open(std::string label) { tree_.nodes.push_back({Node::open, std::move(label), {}}); }

  Tree tree_;
  State state_ = State::idle;
  int64_t depth_ = 0;  // brackets open
  std::string label_, word_;
};

// Splits `text` into tokens and feeds them: on_start() at the '(' that
// begins a tree, on_tree(tree) for each tree completed.
template <typename OnStart, typename OnTree>
void feed(Builder& b, std::string_view text, OnStart on_start, OnTree on_tree) {
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (is_space(c)) {
      ++i;
    } else if (c == '(' || c == ')') {
      ++i;
      if (c == '(' && b.depth() == 0) on_start();
      if (c == '(' ? b.open_paren() : b.close_paren()) on_tree(b.take());
    } else {
      const size_t start = i;
      while (i < text.size() && !is_space(text[i]) && text[i] != '(' && text[i] != ')') ++i;
      if (b.symbol(text.substr(start, i - start))) on_tree(b.take());
    }
  }
}

}  // namespace

Tree parse_tree(std::string_view text) {
  Builder b;
  Tree tree;
  int trees = 0;
  feed(
      b, text, [&] { TFM_REQUIRE(trees == 0, "more than one tree on the line"); },
      [&](Tree t) { tree = std::move(t), ++trees; });
  TFM_REQUIRE(b.depth() == 0, "unbalanced brackets: {} left open at the end", b.depth());
  return tree;
}

struct TreeReader::Impl {
  explicit Impl(const std::string& path) : lines(path) {}
  data::LineReader lines;
  Builder builder;
  std::deque<std::pair<Tree, int64_t>> ready;  // complete trees and their first lines
  int64_t start_line = 0;                      // where the tree being built started
};

TreeReader::TreeReader(const std::string& path) : impl_(std::make_unique<Impl>(path)) {}
TreeReader::~TreeReader() = default;

bool TreeReader::next(Tree& tree) {
  Impl& m = *impl_;
  std::string line;
  while (m.ready.empty()) {
    if (!m.lines.next(line)) {
      if (m.builder.depth() != 0)
        throw Error(fmt::format("unbalanced brackets: the tree that starts on line {} has {} left open at the end",
                                m.start_line, m.builder.depth()),
                    fmt::format("{}:{}", m.lines.path(), m.lines.line_number()));
      return false;
    }
    const int64_t n = m.lines.line_number();
    try {
      feed(
          m.builder, line, [&] { m.start_line = n; },
          [&](Tree t) { m.ready.emplace_back(std::move(t), m.start_line); });
    } catch (const Error& e) {
      throw Error(e.what(), fmt::format("{}:{}", m.lines.path(), n));
    }
  }
  tree = std::move(m.ready.front().first);
  tree_line_ = m.ready.front().second;
  m.ready.pop_front();
  return true;
}

std::string format_tree(const Tree& tree) {
  std::string out;
  for (const Node& n : tree.nodes) {
    if (n.kind != Node::close && !out.empty()) out += ' ';
    switch (n.kind) {
      case Node::open: out += '(', out += n.label; break;
      case Node::leaf: out += '(', out += n.label, out += ' ', out += n.word, out += ')'; break;
      case Node::close: out += ')'; break;
    }
  }
  return out;
}

std::vector<std::string> tree_words(const Tree& tree) {
  std::vector<std::string> words;
  for (const Node& n : tree.nodes)
    if (n.kind == Node::leaf) words.push_back(n.word);
  return words;
}

std::string tree_sentence(const Tree& tree) {
  std::string out;
  for (const Node& n : tree.nodes)
    if (n.kind == Node::leaf) {
      if (!out.empty()) out += ' ';
      out += n.word;
    }
  return out;
}

std::string_view bare_label(std::string_view label) {
  if (label.empty() || label[0] == '-') return label;
  return label.substr(0, label.find_first_of("-=|"));
}

int64_t remove_empty_constituents(Tree& tree) {
  std::vector<Node>& out = tree.nodes;
  std::vector<size_t> opens;  // positions in out of the constituents still open
  int64_t removed = 0;
  size_t kept = 0;            // out[0, kept) is the result so far
  for (size_t i = 0; i < out.size(); ++i) {
    const Node::Kind kind = out[i].kind;
    if (kind == Node::close && opens.back() == kept - 1) {
      --kept, ++removed;  // nothing inside it was kept: it goes too
    } else {
      if (kind == Node::open) opens.push_back(kept);
      if (kept != i) out[kept] = std::move(out[i]);
      ++kept;
    }
    if (kind == Node::close) opens.pop_back();
  }
  out.resize(kept);
  return removed;
}

Tree clean_tree(const Tree& tree) {
  Tree out;
  for (const Node& n : tree.nodes) {
    if (n.kind == Node::leaf && n.label == kEmptyTag) continue;
    out.nodes.push_back(n);
    if (n.kind == Node::open) out.nodes.back().label = bare_label(n.label);
  }
  remove_empty_constituents(out);
  if (out.nodes.empty()) return out;
  // The root: one constituent spanning the whole tree, or something else.
  const bool one_root = out.nodes.front().kind == Node::open && [&] {
    int64_t depth = 0;
    for (size_t i = 0; i < out.nodes.size(); ++i) {
      depth += out.nodes[i].kind == Node::open ? 1 : out.nodes[i].kind == Node::close ? -1 : 0;
      if (depth == 0) return i == out.nodes.size() - 1;
    }
    return false;
  }();
  if (one_root && (out.nodes.front().label.empty() || out.nodes.front().label == kRootLabel)) {
    out.nodes.front().label = kRootLabel;
  } else {
    out.nodes.insert(out.nodes.begin(), Node{Node::open, std::string(kRootLabel), {}});
    out.nodes.push_back({Node::close, {}, {}});
  }
  return out;
}

Tree retag(const Tree& tree, std::string_view tag) {
  Tree out = tree;
  for (Node& n : out.nodes)
    if (n.kind == Node::leaf) n.label = tag;
  return out;
}

}  // namespace tfm::parse
