// Incremental decoding: the decoder one position at a time, with the keys
// and values of earlier positions kept in a cache (used by tfm-decode). It
// gives the same log-probabilities as the full forward pass (a unit test
// holds it to that), without recomputing the prefix at each step.
//
// Memory is planned at construction for `rows` decoder rows (sentences x
// beam) over at most `max_steps` positions and `max_src_len` source tokens:
// the self-attention cache is (rows, H, max_steps, K) and (.., E) per layer,
// the cross-attention keys and values (rows, H, S, K) per layer.
#pragma once

#include <memory>
#include <vector>

#include "libcore/memory.h"
#include "libcore/model/transformer.h"

namespace tfm {

class IncrementalDecoder {
 public:
  IncrementalDecoder(Transformer& model, int64_t rows, int64_t max_src_len, int64_t max_steps);
  ~IncrementalDecoder();

  // Encodes `sources` (one per row; no bos/eos) and empties the cache.
  void start(const std::vector<std::vector<int32_t>>& sources);
  // Feeds tokens[r] at the next position of every row; returns log p of the
  // next token, (rows, V), on the model's device, valid until the next call.
  TensorView step(const std::vector<int32_t>& tokens);
  int64_t position() const { return t_; }
  std::string memory_report() const { return plan_.report(); }

 private:
  struct Ids;
  Transformer& model_;
  int64_t rows_, max_src_len_, max_steps_;
  MemoryPlan plan_;
  std::unique_ptr<Ids> ids_;
  std::unique_ptr<PlannedMemory> mem_;
  Tensor positions_;  // sinusoid table (max_steps, D) when positions are not learned
  int64_t S_ = 0, t_ = 0;
};

}  // namespace tfm
