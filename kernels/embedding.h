// Token embeddings and positions.
// Part of the op catalogue: kernels/ops.h gives the contract every op keeps.
#pragma once

#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"

namespace tfm::ops {

// ----------------------------------- embedding: token embeddings and positions
// ids are i32 on the tensors' device. Rows of an (R, D) tensor are tokens.

// out[n, :] = scale * table[ids[n], :]                 ids (N), table (V, D), out (N, D) =
void embedding_forward(const TensorView& ids, const TensorView& table, float scale,
                       const TensorView& out, const Stream& stream);

// dtable[ids[n], :] += scale * dout[n, :]              dout (N, D), dtable (V, D) +=
void embedding_backward(const TensorView& ids, const TensorView& dout, float scale,
                        const TensorView& dtable, const Stream& stream);

// x[b, t, :] += table[offset + t, :]                    x (B, T, D) +=, table (P, D)
// Positions: a learned table, or the fixed sinusoidal one (sinusoid_table in
// libcore/model). offset + T <= P is required (offset: the decoding step).
void position_add(const TensorView& x, const TensorView& table, int64_t offset,
                  const Stream& stream);
// The same with the offset read when the work runs: offset (1) i32 on the
// tensors' device, or (B), one for each b (a decoding step's positions:
// one captured CUDA graph serves every step). The CPU rejects positions
// past the table; CUDA adds nothing there.
void position_add_at(const TensorView& x, const TensorView& table, const TensorView& offset,
                     const Stream& stream);

// dtable[offset + t, :] += sum_b dx[b, t, :]            dx (B, T, D), dtable (P, D) +=
void position_backward(const TensorView& dx, int64_t offset, const TensorView& dtable,
                       const Stream& stream);

}  // namespace tfm::ops

// The devices' implementations, declared once for both: embedding.cc calls
// impl::OP<D> through on_device once a call is valid; cpu/embedding.cc and
// cuda/embedding.cu define the specializations. Not for callers.
namespace tfm::ops::impl {

template <DeviceType D>
void embedding_forward(const TensorView& ids, const TensorView& table, float scale,
                       const TensorView& out, const Stream& stream);
template <DeviceType D>
void embedding_backward(const TensorView& ids, const TensorView& dout, float scale,
                        const TensorView& dtable, const Stream& stream);
template <DeviceType D>
void position_add(const TensorView& x, const TensorView& table, int64_t offset,
                  const Stream& stream);
template <DeviceType D>
void position_add_at(const TensorView& x, const TensorView& table, const TensorView& offset,
                     const Stream& stream);
template <DeviceType D>
void position_backward(const TensorView& dx, int64_t offset, const TensorView& dtable,
                       const Stream& stream);

}  // namespace tfm::ops::impl
