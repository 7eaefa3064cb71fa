// A batch's way onto the device: checked against the plan, its token rows
// packed, the attention tiles chosen, and one staged upload.
#include <algorithm>
#include <vector>

#include "libcore/model/layers.h"
#include "libcore/model/plan.h"

namespace tfm {

using model::prefix;

void Transformer::upload(const HostBatch& b) {
  const int64_t R = limits_.max_tokens;
  TFM_REQUIRE(b.batch >= 1 && b.src_len >= 1 && b.tgt_len >= 1, "the batch is empty");
  TFM_REQUIRE(b.batch * b.src_len <= R && b.batch * b.tgt_len <= R,
              "batch of {} x {} source and {} x {} target tokens is over the planned {} tokens a side",
              b.batch, b.src_len, b.batch, b.tgt_len, R);
  TFM_REQUIRE(b.src_len <= limits_.max_len && b.tgt_len <= limits_.max_len,
              "a sentence of {} tokens is over the planned maximum length {}",
              std::max(b.src_len, b.tgt_len), limits_.max_len);
  const auto check_ids = [&](const std::vector<int32_t>& ids, bool allow_ignore, const char* what) {
    for (int32_t id : ids)
      TFM_REQUIRE((id >= 0 || (allow_ignore && id == -1)) && id < config_.vocab_size,
                  "{} id {} is outside the vocabulary [0, {})", what, id, config_.vocab_size);
  };
  check_ids(b.src, false, "source");
  check_ids(b.tgt_in, false, "target");
  check_ids(b.tgt_out, true, "target");
  // Every pass starts from the current parameters (an optimizer step may
  // have changed them): refresh the 16-bit copy the GEMMs read.
  refresh_weights();
  B_ = b.batch;
  S_ = b.src_len;
  T_ = b.tgt_len;
  tokens_ = b.target_tokens;
  // Token rows are packed: sentence i owns rows [offsets[i], offsets[i + 1]).
  const auto offsets = [&](const std::vector<int32_t>& lengths, int64_t len, const char* what) {
    std::vector<int32_t> off(lengths.size() + 1, 0);
    for (size_t i = 0; i < lengths.size(); ++i) {
      TFM_REQUIRE(lengths[i] >= 0 && lengths[i] <= len, "{} sentence {} has length {}, outside [0, {}]",
                  what, i, lengths[i], len);
      off[i + 1] = off[i] + lengths[i];
    }
    return off;
  };
  const std::vector<int32_t> src_off = offsets(b.src_lengths, S_, "source");
  const std::vector<int32_t> tgt_off = offsets(b.tgt_lengths, T_, "target");
  Ns_ = src_off.back();
  Nt_ = tgt_off.back();
  attention_tiles();
  std::vector<int32_t> tgt_out;  // packed: padding (-1) dropped
  tgt_out.reserve(static_cast<size_t>(Nt_));
  for (int64_t i = 0; i < B_; ++i)
    for (int64_t t = 0; t < b.tgt_lengths[static_cast<size_t>(i)]; ++t)
      tgt_out.push_back(b.tgt_out[static_cast<size_t>(i * T_ + t)]);
  // One staged upload: the host does not wait for the step in flight,
  // which may still read the previous batch's ids (libcore/base/memory.h).
  const auto part = [&](int id, const std::vector<int32_t>& v) {
    return HostStaging::Part{prefix(memory_->view(id), {static_cast<int64_t>(v.size())}), v};
  };
  const HostStaging::Part parts[] = {part(plan_->src, b.src),
                                     part(plan_->src_lengths, b.src_lengths),
                                     part(plan_->tgt_in, b.tgt_in),
                                     part(plan_->tgt_out, tgt_out),
                                     part(plan_->tgt_lengths, b.tgt_lengths),
                                     part(plan_->src_offsets, src_off),
                                     part(plan_->tgt_offsets, tgt_off)};
  staging_->upload(parts);
}

// CUDA pads the attention tiles of a batch to multiples of 8 in both
// lengths: the score and context GEMMs then have 16-byte aligned rows and
// matrices in 16-bit dtypes (cuBLASLt falls back to slower kernels for odd
// pitches). Each side is padded when its heads fit the plan's head rows,
// and both when the (Tq, Tk) maps of all three attentions fit the planned
// weights; otherwise the tiles are the batch's own lengths. The CPU gains
// nothing from aligned rows and never pads.
void Transformer::attention_tiles() {
  Sa_ = S_;
  Ta_ = T_;
  if (!device_.is_cuda()) return;
  const auto up8 = [](int64_t n) { return (n + 7) / 8 * 8; };
  const int64_t sa = B_ * up8(S_) <= plan_->head_rows ? up8(S_) : S_;
  const int64_t ta = B_ * up8(T_) <= plan_->head_rows ? up8(T_) : T_;
  if (B_ * std::max({sa * sa, ta * ta, ta * sa}) > plan_->map_elems) return;
  Sa_ = sa;
  Ta_ = ta;
}

}  // namespace tfm
