// A batch of sentence pairs as the model takes it: padded to the longest
// sentence on each side, with per-sentence lengths (docs/architecture.md,
// "Packed rows, lengths for masks"). Built on the host; the model uploads it into planned memory.
#pragma once

#include <cstdint>
#include <vector>

#include "libcore/data/vocab.h"  // the reserved ids
#include "libcore/model/config.h"

namespace tfm {

// How a model frames a sentence pair (ModelConfig): the decoder's first
// input, the id that ends every target (and every source, with
// source_eos). The defaults are tfm's own models'.
struct Framing {
  int32_t start = kBosId, eos = kEosId;
  bool source_eos = false;
  static Framing of(const ModelConfig& c) {
    return {static_cast<int32_t>(c.decoder_start_id), static_cast<int32_t>(c.eos_id), c.source_eos};
  }
  // A source as the encoder reads it: its ids, then eos with source_eos.
  std::vector<int32_t> source(std::vector<int32_t> ids) const {
    if (source_eos) ids.push_back(eos);
    return ids;
  }
};

struct HostBatch {
  int64_t batch = 0, src_len = 0, tgt_len = 0;  // B, S, T
  std::vector<int32_t> src;          // (B, S): x_1 .. x_m (eos with source_eos), then kPadId
  std::vector<int32_t> src_lengths;  // (B)
  std::vector<int32_t> tgt_in;       // (B, T): start y_1 .. y_n, then kPadId
  std::vector<int32_t> tgt_out;      // (B, T): y_1 .. y_n eos, then -1 (ignored)
  std::vector<int32_t> tgt_lengths;  // (B): n + 1
  int64_t target_tokens = 0;         // sum of tgt_lengths

  // From token-id sentences (without bos/eos): the decoder reads start + y
  // and predicts y + eos, so position i only sees targets before i.
  static HostBatch from_pairs(const std::vector<std::vector<int32_t>>& sources,
                              const std::vector<std::vector<int32_t>>& targets, const Framing& framing = {});
};

}  // namespace tfm
