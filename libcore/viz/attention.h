// tfm-attnviz's work (cmd/tfm-attnviz.cc is only its options): the
// attention weights of a checkpoint for given sentences, every stack, layer
// and head, as the model's own forward pass computes them.
//
// A sentence's source is raw text (tokenized by the checkpoint's
// SentencePiece model) or pieces. Its target is given (forced) or decoded
// first by the same beam search as tfm-decode (libcore/decode/search.h).
// Then one evaluation pass of the Transformer (no dropout) over the pair, a
// batch of one, and the weights are read back from that pass's saved
// softmax outputs (Transformer::attention_probs): the numbers training and
// decoding use, not a second implementation of attention.
//
// Shapes, per sentence: S source pieces (no eos: the model reads none), T =
// n + 1 decoder positions. Position t reads target_in[t] (<s> y_1 .. y_n)
// and predicts target[t] (y_1 .. y_n </s>): encoder self-attention is
// (L, H, S, S), decoder self-attention (L, H, T, T) with keys target_in
// (causal: zero above the diagonal), encoder-decoder attention (L, H, T, S).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "libcore/data/vocab.h"
#include "libcore/decode/search.h"
#include "libcore/model/model_file.h"
#include "libcore/model/transformer.h"

namespace tfm::viz {

// The three attentions of the model, in the order the page shows them.
enum class Stack { enc, dec, cross };
inline constexpr Stack kStacks[] = {Stack::enc, Stack::dec, Stack::cross};
const char* stack_name(Stack s);        // "enc", "dec", "cross"
Stack parse_stack(const std::string& name);  // Error for anything else

struct SentenceAttention {
  std::vector<std::string> source;     // S pieces
  std::vector<std::string> target;     // T: what each decoder position predicts
  std::vector<std::string> target_in;  // T: what it reads
  bool decoded = false;                // the target came from beam search
  int64_t layers = 0, heads = 0;
  std::vector<float> enc, dec, cross;  // (L, H, S, S), (L, H, T, T), (L, H, T, S)

  int64_t queries(Stack s) const;  // S or T
  int64_t keys(Stack s) const;     // S or T
  // The (queries, keys) map of one layer and head, row-major.
  const float* map(Stack s, int64_t layer, int64_t head) const;
  const std::vector<std::string>& query_tokens(Stack s) const;
  const std::vector<std::string>& key_tokens(Stack s) const;
};

struct AttentionOptions {
  bool pieces = false;          // inputs are pieces, not raw text
  BeamSearchOptions search;     // for sentences without a target
  double max_len_a = 1.0;       // decoded targets: at most a * S + b tokens
  double max_len_b = 50.0;
  Device device = Device::cpu();
};

// A checkpoint ready to show its attention: the model (planned for passes
// of one sentence of up to `max_len` positions on either side) and its
// tokenizer.
class AttentionModel {
 public:
  // Errors: a checkpoint that cannot be read, or one without a tokenizer
  // (the page shows pieces).
  AttentionModel(ModelFile checkpoint, const AttentionOptions& options);
  ~AttentionModel();

  const ModelConfig& config() const { return file_.config(); }
  const Vocab& vocab() const { return *file_.vocab(); }

  // The pieces of one line (raw text or pieces, AttentionOptions::pieces).
  std::vector<int32_t> encode(const std::string& line) const;

  // The weights for sources (and targets, one per source, where given);
  // `names` say which input each sentence came from ("stdin:3") in errors:
  // an empty source, or a pair longer than the model's positions.
  std::vector<SentenceAttention> run(const std::vector<std::string>& sources,
                                     const std::vector<std::optional<std::string>>& targets,
                                     const std::vector<std::string>& names);

 private:
  std::vector<std::vector<int32_t>> decode(const std::vector<std::vector<int32_t>>& sources);
  SentenceAttention forward(const std::vector<int32_t>& source, const std::vector<int32_t>& target);

  ModelFile file_;
  AttentionOptions options_;
  std::unique_ptr<Transformer> model_;
};

// Up to `max` lines of `path` ("-": stdin; plain or gzip), each with its
// name for errors ("FILE:LINE"); `more`: lines were left unread.
struct Lines {
  std::vector<std::string> text, names;
  bool more = false;
};
Lines read_lines(const std::string& path, int64_t max);

// The weights of a model pass already run (Transformer::attention_probs):
// sentence b of the batch, cut to its lengths, as f32 on the host. The
// token lists get those lengths (blank strings) for the caller to fill.
void read_attention(const Transformer& model, int64_t b, int64_t src_len, int64_t tgt_len,
                    SentenceAttention& out);

}  // namespace tfm::viz
