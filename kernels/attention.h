// Attention: heads split and merged, packed rows to padded heads, the
// masked softmax.
// Part of the op catalogue: kernels/ops.h gives the contract every op keeps.
#pragma once

#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"

namespace tfm::ops {

// ------------------------------------------------------------------- attention

// y[a, c, b, d] = x[a, b, c, d]                         x (A, B, C, D), y (A, C, B, D) =
// Splits heads, (B, T, H, K) -> (B, H, T, K), and merges them back.
void permute_0213(const TensorView& x, const TensorView& y, const Stream& stream);

// Packed rows <-> padded heads. The model keeps token rows packed: sentence
// b owns rows [offsets[b], offsets[b + 1]) of rows (N, W), len_b of them,
// len_b <= L, N = offsets[B]; attention wants heads (B, H, L, X). The heads
// are columns [col, col + H X) of the rows (W >= col + H X), so one fused
// projection's (N, 3 H X) rows hold the queries, keys and values side by
// side. offsets (B + 1) i32, non-decreasing from 0 (checked where they are
// made). With c = col + h X:
// heads[b, h, t, :] = t < len_b ? rows[offsets[b] + t, c : c + X] : 0      (heads =)
void unpack_heads(const TensorView& rows, const TensorView& offsets, const TensorView& heads,
                  const Stream& stream, int64_t col = 0);
// rows[offsets[b] + t, c : c + X] = heads[b, h, t, :], t < len_b;           (rows =)
// heads at t >= len_b are not read; the other columns of rows are not written.
void pack_heads(const TensorView& heads, const TensorView& offsets, const TensorView& rows,
                const Stream& stream, int64_t col = 0);

// probs[b, h, i, :] = softmax over the keys j that query i of sentence b may
// see: j < k_lengths[b] and, when causal, j <= i. Hidden keys get 0; a row
// that sees no key is all 0.
// scores, probs (B, H, Tq, Tk) (probs =; may alias scores); k_lengths (B) i32
void masked_softmax_forward(const TensorView& scores, const TensorView& k_lengths, bool causal,
                            const TensorView& probs, const Stream& stream);

// dscores = probs * (dprobs - sum_j probs * dprobs)      (dscores =; may alias dprobs)
void masked_softmax_backward(const TensorView& probs, const TensorView& dprobs,
                             const TensorView& dscores, const Stream& stream);

}  // namespace tfm::ops

// The devices' implementations, declared once for both: attention.cc calls
// impl::OP<D> through on_device once a call is valid; cpu/attention.cc and
// cuda/attention.cu define the specializations. Not for callers.
namespace tfm::ops::impl {

template <DeviceType D>
void permute_0213(const TensorView& x, const TensorView& y, const Stream& stream);
template <DeviceType D>
void unpack_heads(const TensorView& rows, const TensorView& offsets, const TensorView& heads,
                  int64_t col, const Stream& stream);
template <DeviceType D>
void pack_heads(const TensorView& heads, const TensorView& offsets, const TensorView& rows,
                int64_t col, const Stream& stream);
template <DeviceType D>
void masked_softmax_forward(const TensorView& scores, const TensorView& k_lengths, bool causal,
                            const TensorView& probs, const Stream& stream);
template <DeviceType D>
void masked_softmax_backward(const TensorView& probs, const TensorView& dprobs,
                             const TensorView& dscores, const Stream& stream);

}  // namespace tfm::ops::impl
