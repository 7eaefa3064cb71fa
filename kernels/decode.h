// The decoding ops: attention over pooled keys, the self-attention lists
// of a step, the top k of a row.
// Part of the op catalogue: kernels/ops.h gives the contract every op keeps.
#pragma once

#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"

namespace tfm::ops {

// ------------------------------------------------------------ decode: decoding
// The inference path (libcore/decode, tfm-decode). Each op computes every
// row alone and in a fixed order, so a row's result does not depend on the
// other rows of the call, on their number or on the thread count (batch
// invariance; the GEMMs with GemmOptions::row_invariant).

// Attention of query rows over keys and values gathered from pools. Row n
// reads the key list g = groups[n]: pool rows index[g, j] for j < lengths[g].
//   s_j = scale * q[n, h, :] . keys[index[g, j], h, :]
//   p = softmax_j(s);   out[n, h, :] = sum_j p_j * values[index[g, j], h, :]
// q (N, H, K); keys (P, H, K); values (P, H, E); index (G, L) i32 in [0, P);
// lengths (G) i32 in [0, L]; groups (N) i32 in [0, G);
// out (N, H, E) =;  probs (N, H, L) = p_j, 0 past the length (optional: an
// empty view). A row whose list is empty gets out = 0. Pools are how the
// decoder avoids copies: a beam's self-attention cache is read through its
// history of pool rows, and a sentence's cross-attention keys are shared by
// its beams (one group). dtypes: q, keys, values, out alike (CPU f32 or f64;
// CUDA f32, bf16 or f16, accumulating in f32); probs f32 (f64 for f64).
void attention_gather(const TensorView& q, const TensorView& keys, const TensorView& values,
                      const TensorView& index, const TensorView& lengths,
                      const TensorView& groups, float scale, const TensorView& out,
                      const TensorView& probs, const Stream& stream);

// The self-attention lists of a decoding step: row r, at position
// p = positions[r] of its sentence, continues row parents[r] of the last
// step, so it attends to its parent's first p pool rows, then to its own
// new one, pool row slots[r]:
//   next[r, j] = prev[parents[r], j]   (j < p)
//   next[r, p] = slots[r];  lengths[r] = p + 1
// A row at position 0 (a sentence's first) reads no parent. Rows of one
// step may be at different positions (sentences join a batch as others
// leave it); the positions and slots are read when the work runs, so one
// captured CUDA graph serves every step (scatter_columns then writes the
// step's keys and values to the slots).
// prev (R, T) i32 (rows past the last step's are not read); next (R', T)
// i32, R' >= N, not prev (a slice of the step's lists: the decoder's
// threads extend their own rows); parents, positions, slots (N) i32 on the
// tensors' device; lengths (N) i32 =. The CPU rejects a position outside
// [0, T) and, past position 0, a parent outside [0, R); CUDA writes
// nothing for such a position and an empty list (-1s) for such a parent.
// The lists stay on the device from step to step: only the rows' parents,
// positions and slots go up.
void extend_history(const TensorView& prev, const TensorView& parents, const TensorView& positions,
                    const TensorView& slots, const TensorView& next, const TensorView& lengths,
                    const Stream& stream);

// The k most likely next tokens of each row of logits, and its normalizer:
//   lse[n] = log sum_v exp(logits[n, v])
//   ids[n, :] = the k largest logits of row n, largest first (ties: smaller id first)
//   values[n, i] = logits[n, ids[n, i]] - lse[n]          (log-probabilities)
// logits (N, V); values (N, k) =; ids (N, k) i32 =; lse (N) =; 1 <= k <= V.
// values and lse are f32 (f64 for f64 logits); logits as log_softmax takes them.
// What a beam search needs of a step, without (N, V) log-probabilities.
void log_softmax_topk(const TensorView& logits, const TensorView& values, const TensorView& ids,
                      const TensorView& lse, const Stream& stream);

}  // namespace tfm::ops

// The devices' implementations, declared once for both: decode.cc calls
// impl::OP<D> through on_device once a call is valid; cpu/decode.cc and
// cuda/decode.cu define the specializations. Not for callers.
namespace tfm::ops::impl {

template <DeviceType D>
void attention_gather(const TensorView& q, const TensorView& keys, const TensorView& values,
                      const TensorView& index, const TensorView& lengths, const TensorView& groups,
                      float scale, const TensorView& out, const TensorView& probs,
                      const Stream& stream);
template <DeviceType D>
void extend_history(const TensorView& prev, const TensorView& parents, const TensorView& positions,
                    const TensorView& slots, const TensorView& next, const TensorView& lengths,
                    const Stream& stream);
template <DeviceType D>
void log_softmax_topk(const TensorView& logits, const TensorView& values, const TensorView& ids,
                      const TensorView& lse, const Stream& stream);

}  // namespace tfm::ops::impl
