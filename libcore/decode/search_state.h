// The search's state between steps, shared by search.cc (beam search,
// sampling, continuous batching) and constraints.cc (forced prefixes,
// constrained steps). Internal to libcore/decode.
#pragma once

#include <cstdint>
#include <vector>

#include "libcore/decode/constraints.h"
#include "libcore/decode/search.h"

namespace tfm::detail {

// A live hypothesis: its tokens so far, and the decoder row of the step that
// proposed its last token (the parent of the row that feeds it next).
struct Live {
  std::vector<int32_t> tokens;
  std::vector<float> token_log_probs;
  std::vector<float> attention;
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
  const Sentence& s;
  const StepResult& step;
  const BeamSearchOptions& o;
  // h and one more token, fed by `row` (eos is scored, not appended; the
  // constraints' state is the caller's); `take`: h's last extension this
  // step, which takes h's vectors instead of copying them.
  Live operator()(Live& h, int32_t row, int32_t token, float lp, bool take) const;
  // A hypothesis that ended (with eos) into s's finished ones.
  void finish(Sentence& into, Live&& n) const;
};

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

}  // namespace tfm::detail
