// Elementwise ops: add, ReLU and the other feed-forward activations, casts,
// column copies, uniform numbers.
// Part of the op catalogue: kernels/ops.h gives the contract every op keeps.
#pragma once

#include "libcore/base/rng.h"
#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"

namespace tfm::ops {

// ----------------------------------------------------------------- elementwise

// y = a + b                                    (same shape; y =; y may be a or b)
void add(const TensorView& a, const TensorView& b, const TensorView& y, const Stream& stream);

// y = w (x - base)                             (same shape; y =; y may be x or base)
// In f32 (f64 for f64 tensors): an ensemble's mean of logits as z_0 plus
// its members' weighted differences from z_0, exactly z_0 for copies.
void scaled_difference(const TensorView& x, const TensorView& base, float w, const TensorView& y,
                       const Stream& stream);

// y = max(0, x)                                (y =; saves y, whose sign is the mask)
void relu_forward(const TensorView& x, const TensorView& y, const Stream& stream);

// dx = dy * (y > 0)                            (dx =; dx may be dy)
void relu_backward(const TensorView& y, const TensorView& dy, const TensorView& dx,
                   const Stream& stream);

// The feed-forward's activations (ModelConfig::activation):
//   relu  max(0, x)
//   gelu  x Phi(x) = x (1 + erf(x / sqrt 2)) / 2   (exact, not the tanh form)
//   silu  x sigmoid(x) = x / (1 + exp(-x))         (swish with beta 1)
enum class Activation : uint8_t { relu, gelu, silu };

// y = act(x)                                   (same shape; y =; y may be x)
// Computed in f32 (f64 for f64 tensors), stored in x's dtype.
void activation_forward(const TensorView& x, Activation act, const TensorView& y, const Stream& stream);

// dx = dy * act'(x), x the forward's input     (same shape; dx =; dx may be dy)
// relu's derivative at 0 is 0, as relu_backward's.
void activation_backward(const TensorView& x, const TensorView& dy, Activation act, const TensorView& dx,
                         const Stream& stream);

// y = x converted to y's dtype, rounding to nearest even   (same shape; y =)
// Any float dtypes, on the CPU too (f32 <-> bf16 / f16 / f64): the bridge
// between fp32 master weights and 16-bit compute.
void cast(const TensorView& x, const TensorView& y, const Stream& stream);

// y[r, :] = x[r, col : col + W]                 x (R, X), y (R, W) =, one dtype
// A block of columns, copied by a kernel on CUDA rather than a 2-D memcpy
// (the decoder's steps, captured as CUDA graphs, then hold only kernels).
void copy_columns(const TensorView& x, int64_t col, const TensorView& y, const Stream& stream);

// y[index[r], :] = x[r, col : col + W]          x (R, X), y (P, W) rows =, index (R) i32
// The rows of a block of columns to rows of y that index names (distinct),
// the index read when the work runs: the decoder writes a step's keys and
// values into its pools where extend_history put them, so that one CUDA
// graph serves every position. The CPU rejects an index outside [0, P);
// CUDA skips such a row.
void scatter_columns(const TensorView& x, int64_t col, const TensorView& index, const TensorView& y,
                     const Stream& stream);

// out[i] = lo + (hi - lo) * u_i, u_i = uniform01(philox_bits(key, i)) in [0, 1)
//                                             (out =; rounding may reach hi itself)
// The same key gives the same numbers on every device (libcore/base/rng.h).
void uniform(const TensorView& out, const RngKey& key, float lo, float hi, const Stream& stream);

}  // namespace tfm::ops

// The devices' implementations, declared once for both: elementwise.cc calls
// impl::OP<D> through on_device once a call is valid; cpu/elementwise.cc and
// cuda/elementwise.cu define the specializations. Not for callers.
namespace tfm::ops::impl {

template <DeviceType D>
void add(const TensorView& a, const TensorView& b, const TensorView& y, const Stream& stream);
template <DeviceType D>
void scaled_difference(const TensorView& x, const TensorView& base, float w, const TensorView& y,
                       const Stream& stream);
template <DeviceType D>
void relu_forward(const TensorView& x, const TensorView& y, const Stream& stream);
template <DeviceType D>
void relu_backward(const TensorView& y, const TensorView& dy, const TensorView& dx,
                   const Stream& stream);
template <DeviceType D>
void activation_forward(const TensorView& x, Activation act, const TensorView& y, const Stream& stream);
template <DeviceType D>
void activation_backward(const TensorView& x, const TensorView& dy, Activation act, const TensorView& dx,
                         const Stream& stream);
template <DeviceType D>
void cast(const TensorView& x, const TensorView& y, const Stream& stream);
template <DeviceType D>
void copy_columns(const TensorView& x, int64_t col, const TensorView& y, const Stream& stream);
template <DeviceType D>
void scatter_columns(const TensorView& x, int64_t col, const TensorView& index, const TensorView& y,
                     const Stream& stream);
template <DeviceType D>
void uniform(const TensorView& out, const RngKey& key, float lo, float hi, const Stream& stream);

}  // namespace tfm::ops::impl
