// The search's state between steps, shared by search.cc (beam search,
// sampling, continuous batching) and constraints.cc (forced prefixes,
// constrained steps). Internal to libcore/decode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "libcore/decode/constraints.h"
#include "libcore/decode/search.h"

namespace tfm::detail {

// A token some hypothesis of a sentence took, in the sentence's tree of
// them (Sentence::nodes): the node before it (-1: none), the token (eos
// last, where a hypothesis ended) and its log-probability. A hypothesis is
// its last node, and its tokens are read back up the tree only when it
// ends: extending one appends a node (and its attention row) instead of
// copying its tokens, log-probabilities and attention into each extension.
struct Node {
  int32_t parent;
  int32_t token;
  float log_prob;
};

// A live hypothesis: its last node (-1 before its first token), and the
// decoder row of the step that proposed that token (the parent of the row
// that feeds it next).
struct Live {
  int32_t node = -1;
  double log_prob = 0;
  int32_t row = 0;
  int32_t sample = 0;  // sampling: which of the sentence's samples
  ConstraintState constraints;  // with constraints: its progress through them
};

struct Sentence {
  const SearchRequest* request = nullptr;
  size_t index = 0;     // the caller's number for it
  int32_t slot = 0;     // the decoder's sentence slot
  int64_t t = 0;        // positions decoded
  std::vector<Live> live;
  std::vector<Live> spare;      // a step's next live ones are built here, then swapped in
  std::vector<Node> nodes;      // every token its hypotheses took
  std::vector<float> attention; // with attention kept: node i's row at i times a row's size
  std::vector<Hypothesis> finished;
  std::vector<int32_t> finished_samples;  // sampling: each finished one's sample
  bool done = false;
};

// What a decoder step gave every row: the top k tokens and their
// log-probabilities (row-major), eos's log-probability where a sentence is
// at its longest, the attention weights when kept, and every row's V
// log-probabilities (full, (N, V)) where a sentence has a prefix or
// constraints (else null).
struct StepResult {
  int64_t k;
  int32_t eos_id;  // the model's
  const std::vector<double>& log_probs;
  const std::vector<int32_t>& ids;
  const std::vector<double>& eos;
  const Tensor& weights;
  const double* full = nullptr;
  int64_t V = 0;
};

// Hypotheses of one sentence grown by a token at a step.
struct Extender {
  Sentence& s;
  const StepResult& step;
  const BeamSearchOptions& o;
  // h and one more token, fed by `row`: a node in s's tree (the
  // constraints' state is the caller's).
  Live operator()(const Live& h, int32_t row, int32_t token, float lp) const;
  // A hypothesis that ended (with eos) into s's finished ones.
  void finish(const Live& n) const;
};

// The hypothesis that ends at n, a hypothesis of s whose last token is
// eos: its tokens (eos left out), their log-probabilities and attention
// rows read back up s's tree, and its score.
Hypothesis ended(const Sentence& s, const Live& n, const BeamSearchOptions& o);

// A live hypothesis (of the sentence's, by index) and one more token.
struct Proposal {
  double log_prob;   // of the extended hypothesis
  float token_log_prob;
  int32_t live;      // index into the sentence's live hypotheses
  int32_t token;
  ConstraintState state = {};  // with constraints: after the token
};

// Goes down `proposals` in their order: one of eos ends its hypothesis,
// any other continues one, until W continue; those are s's live ones.
void take_proposals(Sentence& s, int32_t first, const std::vector<Proposal>& proposals, const Extender& extended,
                    int64_t W);

bool ranks_before(const Hypothesis& a, const Hypothesis& b);

// The early-stopping rule after a step left s with live hypotheses, best
// first by log_prob when `sorted` (else searched for the best).
bool stops(Sentence& s, const BeamSearchOptions& o, EarlyStopping stopping, bool sorted);

// A step of a sentence inside its prefix (t < |prefix|): every live
// hypothesis takes the prefix's token (step.full has its log-probability).
void advance_forced(Sentence& s, int32_t first, const StepResult& step, const BeamSearchOptions& o);

// A step of a sentence with constraints past its prefix: dynamic beam
// allocation (constraints.h).
void advance_constrained(Sentence& s, int32_t first, const StepResult& step, const BeamSearchOptions& o,
                         EarlyStopping stopping);

// search_stream's queue of requests, shared by its decoders (the caller
// locks): requests go in order, each to the first decoder with room for it.
// Its tail is shared out: when a decoder runs dry and fewer are left than
// the decoders hold, each may take at most an even share of what is left,
// so that the last sentences are split between the threads instead of one
// taking a whole batch while another finishes a few and waits (300
// sentences in batches of 32 on two threads: the last batches 22 and 22,
// not 32 and 12). A decoder that runs dry again takes a share of what is
// left then. Refilled decoders rarely run dry before the end.
class SearchQueue {
 public:
  // `holds`: the sentences a decoder holds at most.
  SearchQueue(size_t requests, size_t decoders, size_t holds);

  bool empty() const { return next_ == requests_; }
  size_t next() const { return next_; }  // the request a take would give
  // The next request for `decoder`, which has `held` sentences (live and
  // joining), or none when the queue is empty or its share is taken.
  std::optional<size_t> take(size_t decoder, int64_t held);

 private:
  size_t requests_, holds_;
  size_t next_ = 0;
  bool tail_ = false;
  std::vector<size_t> allowed_;  // in the tail: what each decoder may still take
};

}  // namespace tfm::detail
