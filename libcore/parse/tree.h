// Constituency trees in the Penn Treebank's bracketed form: reading them
// (any layout, several a file, as in the treebank's .mrg files), writing
// them one a line (EVALB's form), and cleaning them as parsing papers do.
//
// A tree is held flat, its nodes in the order the brackets are written:
//   (S (NP (NNP John)) (VP (VBZ runs)))
//   open S, open NP, leaf NNP John, close, open VP, leaf VBZ runs, close, close
// A leaf is a preterminal (POS tag and word); every open has its close. No
// operation here recurses, so a line of 100,000 '(' is an error message or
// a deep tree, never a stack overflow.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::parse {

struct Node {
  enum Kind : uint8_t { open, leaf, close };
  Kind kind = open;
  std::string label;  // open: the constituent's label; leaf: the POS tag; close: empty
  std::string word;   // leaf only
};

struct Tree {
  std::vector<Node> nodes;  // balanced; empty for an empty tree (a blank line)
  bool empty() const { return nodes.empty(); }
};

// The grammar both readers accept: tree := '(' LABEL? (WORD | tree+) ')',
// LABEL and WORD being runs of characters other than space and parentheses
// ("( (S ...) )", the treebank's root, has an empty label). A bracket with
// nothing in it, a word beside a subtree, a word outside brackets and
// unbalanced brackets are errors.

// One tree from a string, as EVALB reads a line. A blank string is an empty
// tree. Throws Error saying what is wrong (without a position) for anything
// that is not one well-formed tree.
Tree parse_tree(std::string_view text);

// Trees from a file ("-": stdin, plain or gzip), one after another whatever
// the line breaks: a tree ends where its brackets balance. Errors throw
// Error naming FILE:LINE.
class TreeReader {
 public:
  explicit TreeReader(const std::string& path);
  ~TreeReader();
  TreeReader(const TreeReader&) = delete;
  TreeReader& operator=(const TreeReader&) = delete;

  // The next tree; false at the end of the input.
  bool next(Tree& tree);
  // The line the last tree returned started on (1-based).
  int64_t line_number() const { return tree_line_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t tree_line_ = 0;
};

// One line: "(TOP (S (NP (NNP John)) (VP (VBZ runs))))"; "" for an empty tree.
std::string format_tree(const Tree& tree);

// The words of the leaves, in order.
std::vector<std::string> tree_words(const Tree& tree);
// The words joined by single spaces: the tree's sentence.
std::string tree_sentence(const Tree& tree);

// The label of a constituent without its function tags and indices, as
// parsing papers (and EVALB) compare them: cut at the first '-', '=' or '|'
// ("NP-SBJ-1" -> "NP", "NP=2" -> "NP", "ADVP|PRT" -> "ADVP"); a label that
// starts with '-' ("-NONE-", "-LRB-") is kept whole.
std::string_view bare_label(std::string_view label);

// The root label of every cleaned tree; EVALB's COLLINS.prm deletes it.
inline constexpr std::string_view kRootLabel = "TOP";
// The POS tag of empty elements (traces, null complementizers).
inline constexpr std::string_view kEmptyTag = "-NONE-";

// Cleans a treebank tree as parsing papers do:
//   - leaves tagged -NONE- (empty elements: traces, null subjects and
//     complementizers) are removed;
//   - constituents left dominating no word are removed, recursively;
//   - constituent labels lose function tags and indices (bare_label); POS
//     tags and words are kept as they are;
//   - the root is labelled TOP: the treebank's unlabelled root is renamed,
//     a tree whose root has a label is put under a new TOP.
// A tree left with no word is the empty tree.
Tree clean_tree(const Tree& tree);

// Removes the constituents that dominate no word, recursively (those left
// empty once their empty children are gone); returns how many.
int64_t remove_empty_constituents(Tree& tree);

// The same tree with every POS tag replaced by `tag`.
Tree retag(const Tree& tree, std::string_view tag);

}  // namespace tfm::parse
