// A batch of sentence pairs as the model takes it: padded to the longest
// sentence on each side, with per-sentence lengths (docs/architecture.md,
// "Packed rows, lengths for masks"). Built on the host; the model uploads it into planned memory.
#pragma once

#include <cstdint>
#include <vector>

#include "libcore/data/vocab.h"  // the reserved ids

namespace tfm {

struct HostBatch {
  int64_t batch = 0, src_len = 0, tgt_len = 0;  // B, S, T
  std::vector<int32_t> src;          // (B, S), kPadId after each sentence
  std::vector<int32_t> src_lengths;  // (B)
  std::vector<int32_t> tgt_in;       // (B, T): bos y_1 .. y_n, then kPadId
  std::vector<int32_t> tgt_out;      // (B, T): y_1 .. y_n eos, then -1 (ignored)
  std::vector<int32_t> tgt_lengths;  // (B): n + 1
  int64_t target_tokens = 0;         // sum of tgt_lengths

  // From token-id sentences (without bos/eos): the decoder reads bos + y and
  // predicts y + eos, so position i only sees targets before i.
  static HostBatch from_pairs(const std::vector<std::vector<int32_t>>& sources,
                              const std::vector<std::vector<int32_t>>& targets);
};

}  // namespace tfm
