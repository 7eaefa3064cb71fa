// Model scores (tfm-score -m): forced decoding of given targets, for
// rescoring n-best lists and for perplexity. Each target token's
// log p(y_t | y_<t, x), eos included, from Transformer::log_probs.
//
// Batching is by padded token count (as training's): the pairs are sorted by
// length, packed while B*S and B*T stay within max_tokens (a longer pair
// goes alone), and the scores come back in input order. The model is sized
// for the largest batch of the plan; the scores do not depend on the plan
// beyond float rounding of the batched matrix products.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <string>
#include <vector>

#include "libcore/base/precision.h"
#include "libcore/data/vocab.h"
#include "libcore/eval/score.h"
#include "libcore/model/model_file.h"
#include "libcore/model/transformer.h"

namespace tfm {
class Progress;
}

namespace tfm::eval {

// Sentence pairs as token ids, without bos/eos.
struct Pairs {
  std::vector<std::vector<int32_t>> src, tgt;
};

// Reads two files (one may be "-", stdin; plain or gzip) of pieces as tfm-tok
// writes them (mapped with `vocab`, unknown pieces to <unk>), or of ids when
// `vocab` is null. Error naming FILE:LINE for an id outside [0, vocab_size)
// or an empty source line, and naming both files for a line-count mismatch.
Pairs read_pairs(const std::string& src_path, const std::string& tgt_path, const Vocab* vocab,
                 int64_t vocab_size);
// One pair's lines (pieces or ids, as read_pairs maps them) added to
// `pairs`; an error names where(true) for the source, where(false) for the
// target.
void add_pair(Pairs& pairs, std::string_view src, std::string_view tgt, const Vocab* vocab, int64_t vocab_size,
              const std::function<std::string(bool source)>& where);

struct ScoringPlan {
  std::vector<std::vector<size_t>> batches;  // pair indices, shortest first
  ModelLimits limits;                        // what the largest batch needs
};
// Error for a pair longer than `config.max_positions` (naming its line).
ScoringPlan plan_scoring(const Pairs& pairs, int64_t max_tokens, const ModelConfig& config);

struct SentenceScore {
  double log_prob = 0;                 // the sum of token_log_probs, in float64
  std::vector<double> token_log_probs; // one per target token, eos last
};
struct ModelScores {
  std::vector<SentenceScore> sentences;  // in input order
  double log_prob = 0;                   // over the corpus
  int64_t tokens = 0;                    // target tokens, eos included
  double perplexity() const;             // exp(-log_prob / tokens)
};

// Scores every pair with `model`, whose limits must cover plan.limits.
// `progress`: sentences and target tokens scored, after every batch.
ModelScores score_pairs(Transformer& model, const Pairs& pairs, const ScoringPlan& plan,
                        Progress* progress = nullptr);

// The whole job of tfm-score -m: reads the pairs (pieces mapped with the
// checkpoint's own tokenizer, or ids), plans the batches, builds the model
// the checkpoint describes on `device`, sized for the plan, and scores.
struct ModelScoreOptions {
  std::string src = "-", tgt = "-";  // files of pieces (or ids); "-": stdin
  bool ids = false;                  // token ids instead of pieces
  int64_t max_tokens = 2048;         // padded tokens a side of a batch
  Device device = Device::cpu();
  Precision precision = Precision::fp32;  // resolved for `device`: fp32, or int8 on the CPU
  Progress* progress = nullptr;      // see score_pairs
};
ModelScores score_with_model(const ModelFile& checkpoint, const ModelScoreOptions& o);
// The same for pairs in memory (o.src, o.tgt and o.ids unused: the pairs
// are ids already).
ModelScores score_with_model(const ModelFile& checkpoint, const Pairs& pairs, const ModelScoreOptions& o);

// The corpus line "PPL = 12.3456 (log-prob = -1234.5678, tokens = 345,
// sentences = 10)", the number alone (f.score_only) or a JSON object.
std::string format_model_corpus(const ModelScores& s, const FormatOptions& f);
// One line per sentence: "TOTAL<TAB>LP_1 ... LP_n LP_eos", the total alone
// (f.score_only) or a JSON object.
std::string format_model_sentences(const ModelScores& s, const FormatOptions& f);

}  // namespace tfm::eval
