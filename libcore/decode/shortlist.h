// Vocabulary shortlists (tfm-decode --shortlist; built by tfm-tok
// shortlist): each source piece's likely target pieces, as Marian's and
// CTranslate2's lexical shortlists. A sentence's candidates are the union of
// its source pieces' lists, the pieces every sentence gets (the corpus's
// most frequent) and eos; the decoder scores those alone and normalizes
// over them (IncrementalDecoder): a sentence's set is its own, so its
// output does not depend on the sentences it is batched with.
//
// The file is text (man tfm-decode, SHORTLIST FILE):
//   tfm-shortlist 1 [KEY=VALUE ...]        the header; the fields say how it was built
//   <TAB>TGT TGT ...                       the pieces every sentence gets (once, optional)
//   SRC<TAB>TGT TGT ...                    a source piece's candidates, best first
// Pieces are mapped through the checkpoint's vocabulary when it is read: a
// piece the vocabulary lacks (a shortlist of another tokenizer) is an error.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tfm {

class Vocab;

class Shortlist {
 public:
  // Reads `path` against `vocab` (ids below vocab_size); Error naming
  // PATH:LINE for anything malformed.
  static Shortlist load(const std::string& path, const Vocab& vocab, int64_t vocab_size);
  // From ids: `always` every sentence's, `lists[s]` source id s's (tests).
  Shortlist(int64_t vocab_size, std::vector<int32_t> always, const std::vector<std::vector<int32_t>>& lists);

  // A source's candidates, sorted by id: always, `eos`, and each source
  // id's list; filled up with the smallest ids not yet in it to at least
  // `at_least` (the beam's top k) when shorter.
  std::vector<int32_t> candidates(std::span<const int32_t> source, int32_t eos, int64_t at_least) const;
  // The most candidates `sentences` sources of `source_tokens` tokens in
  // all can have together (candidates' at_least each).
  int64_t most(int64_t source_tokens, int64_t sentences, int64_t at_least) const;
  int64_t vocab_size() const { return vocab_size_; }
  // The pieces every sentence gets (sorted), and source id s's list as
  // read (best first): what a shortlist says, for writing it elsewhere.
  std::span<const int32_t> always() const { return always_; }
  std::span<const int32_t> targets(int32_t s) const {
    const auto u = static_cast<size_t>(s);
    return {targets_.data() + offsets_[u], static_cast<size_t>(offsets_[u + 1] - offsets_[u])};
  }

 private:
  Shortlist() = default;
  int64_t vocab_size_ = 0, longest_ = 0;
  std::vector<int32_t> always_;
  std::vector<int64_t> offsets_;  // (V + 1): source id s's targets are [offsets_[s], offsets_[s + 1])
  std::vector<int32_t> targets_;
};

// tfm-tok shortlist: a shortlist from a parallel corpus of pieces by
// sentence co-occurrence. For source piece s and target piece t, c(s), c(t)
// and c(s, t) count the sentence pairs that hold s, t, and both; t is a
// candidate of s when c(s, t) >= min_count, ranked by the Dice coefficient
// 2 c(s, t) / (c(s) + c(t)) (ties: larger c(s, t), then the piece's bytes),
// the best `best` kept. With `alignments` (Pharaoh links "I-J ..." a pair,
// or tfm-decode --alignment pieces output, "PIECES ||| I-J ...", which may
// be TARGET itself) the counts are of links instead: c(s, t) the links
// between s and t, c(s) the links from s, and t ranked by the lexical
// probability p(t | s) = c(s, t) / c(s), the table Marian's shortlists
// come from. The `frequent` target pieces seen most often (as tokens) go
// to every sentence. Written atomically.
struct ShortlistBuildOptions {
  std::string output;
  std::string alignments;  // a links file; empty: sentence co-occurrence
  int64_t best = 50;
  int64_t frequent = 100;
  int64_t min_count = 2;
};
struct ShortlistBuildTotals {
  int64_t pairs = 0, sources = 0, entries = 0, links = 0;
};
ShortlistBuildTotals build_shortlist(const std::string& source, const std::string& target,
                                     const ShortlistBuildOptions& options);

}  // namespace tfm
