// Parsing as translation (Vinyals et al. 2015, "Grammar as a Foreign
// Language"; the paper's section 6.3): a tree becomes a sequence of
// brackets and one placeholder a word, and a decoded sequence becomes a
// tree with the input's words again.
//
//   (TOP (S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .)))
//   <-> (S (NP XX )NP (VP XX (NP XX XX )NP )VP XX )S      words: John has a dog .
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "libcore/parse/tree.h"

namespace tfm::parse {

// The symbol of every word in a sequence, and the POS tag of every word of
// a tree made from one (such a tree has no tags).
inline constexpr std::string_view kWordSymbol = "XX";

// "(L" for a constituent's opening, ")L" for its end, XX for a word (POS
// tags and words are dropped). A root labelled TOP is left out (its
// children follow one another); any other root is kept. Tokens are
// separated by single spaces.
std::string linearize(const Tree& tree);

// What delinearize had to change to make a tree of a sequence.
struct Repairs {
  int64_t closers_dropped = 0;       // ")L" with no open constituent
  int64_t closers_added = 0;         // constituents still open at the end
  int64_t words_added = 0;           // the sequence had fewer word symbols than words
  int64_t words_dropped = 0;         // ... or more
  int64_t constituents_dropped = 0;  // constituents left with no word
  bool any() const {
    return closers_dropped + closers_added + words_added + words_dropped + constituents_dropped > 0;
  }
  Repairs& operator+=(const Repairs& o);
};

// The tree of a sequence, holding `words` in order, each tagged XX, under
// a root labelled TOP. Any sequence gives a tree; the repairs, in order:
//   1. brackets: "(L" opens a constituent labelled L, a token starting with
//      ')' closes the innermost open one (its label is not checked); a
//      closer with nothing open is dropped, and constituents still open at
//      the end are closed there (Vinyals et al. add the missing brackets
//      at the beginning or the end; an unmatched closer has no label to
//      open with at the beginning, so it goes).
//   2. words: every other token is a word's place. Places beyond the
//      number of words are dropped from the end; missing ones are added at
//      the end of the last top-level constituent (under the root when the
//      sequence ends with a word at top level, or has no constituent).
//   3. constituents that dominate no word are removed.
// With no words the tree is empty. `repairs`, when given, is added to.
Tree delinearize(std::string_view sequence, std::span<const std::string> words, Repairs* repairs = nullptr);

}  // namespace tfm::parse
