// What the search tests share (search_test, sampling_test,
// constraints_test): a small random model, and a decoder planned for
// exactly the batch at hand.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "libcore/decode/search.h"

namespace tfm::test {

// The tiny preset at d_model 16 over `vocab` ids.
inline ModelConfig small_config(int64_t vocab) {
  ModelConfig c = ModelConfig::preset("tiny");
  c.parse(fmt::format("vocab_size = {}\nd_model = 16\nd_ff = 32\nheads = 2\nd_k = 8\nd_v = 8\n"
                      "max_positions = 64", vocab));
  return c;
}

// Random f32 weights, for decoding.
inline std::unique_ptr<ModelWeights> inference_model(int64_t vocab, uint64_t seed) {
  auto model = std::make_unique<ModelWeights>(small_config(vocab), Device::cpu());
  model->init(seed);
  return model;
}

// A decoder planned for `batch` searched with `o`.
inline DecoderLimits limits_for(const std::vector<SearchRequest>& batch, const BeamSearchOptions& o,
                                int64_t vocab) {
  DecoderLimits l;
  l.sentences = static_cast<int64_t>(batch.size());
  for (const SearchRequest& r : batch) l.src_len = std::max<int64_t>(l.src_len, static_cast<int64_t>(r.source.size()));
  l.src_tokens = l.sentences * l.src_len;
  l.rows = search_rows(l.sentences, o);
  l.steps = search_steps(batch);
  l.top_k = std::min<int64_t>(2 * o.beam_size, vocab);
  l.attention_layer = o.attention_layer;
  return l;
}

inline std::vector<std::vector<Hypothesis>> search(const ModelWeights& model, const std::vector<SearchRequest>& batch,
                                                   const BeamSearchOptions& o) {
  IncrementalDecoder dec(model, limits_for(batch, o, model.config().vocab_size));
  return beam_search(dec, batch, o);
}

}  // namespace tfm::test
