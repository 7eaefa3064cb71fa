#include "libcore/model/batch.h"

#include <algorithm>

#include "libcore/base/error.h"

namespace tfm {

HostBatch HostBatch::from_pairs(const std::vector<std::vector<int32_t>>& sources,
                                const std::vector<std::vector<int32_t>>& targets, const Framing& framing) {
  TFM_REQUIRE(sources.size() == targets.size() && !sources.empty(),
              "a batch needs as many sources as targets, and at least one (got {} and {})",
              sources.size(), targets.size());
  HostBatch b;
  b.batch = static_cast<int64_t>(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    TFM_REQUIRE(!sources[i].empty(), "sentence {} of the batch has an empty source", i);
    b.src_len = std::max<int64_t>(b.src_len, static_cast<int64_t>(sources[i].size()) + framing.source_eos);
    b.tgt_len = std::max<int64_t>(b.tgt_len, static_cast<int64_t>(targets[i].size()) + 1);
  }
  b.src.assign(static_cast<size_t>(b.batch * b.src_len), kPadId);
  b.tgt_in.assign(static_cast<size_t>(b.batch * b.tgt_len), kPadId);
  b.tgt_out.assign(static_cast<size_t>(b.batch * b.tgt_len), -1);
  for (size_t i = 0; i < sources.size(); ++i) {
    const auto& s = sources[i];
    const auto& t = targets[i];
    std::copy(s.begin(), s.end(), b.src.begin() + static_cast<int64_t>(i) * b.src_len);
    if (framing.source_eos) b.src[static_cast<size_t>(static_cast<int64_t>(i) * b.src_len) + s.size()] = framing.eos;
    b.src_lengths.push_back(static_cast<int32_t>(s.size()) + framing.source_eos);
    const int64_t row = static_cast<int64_t>(i) * b.tgt_len;
    b.tgt_in[static_cast<size_t>(row)] = framing.start;
    for (size_t j = 0; j < t.size(); ++j) {
      b.tgt_in[static_cast<size_t>(row) + j + 1] = t[j];
      b.tgt_out[static_cast<size_t>(row) + j] = t[j];
    }
    b.tgt_out[static_cast<size_t>(row) + t.size()] = framing.eos;
    b.tgt_lengths.push_back(static_cast<int32_t>(t.size() + 1));
    b.target_tokens += static_cast<int64_t>(t.size()) + 1;
  }
  return b;
}

}  // namespace tfm
