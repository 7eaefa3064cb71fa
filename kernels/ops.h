// The op catalogue: every numeric op of tfm, declared once, with its math.
//
// Contract for every op in this file:
// - Tensors are dense row-major TensorViews; shapes use the alphabet of
//   libcore/tensor.h. All tensors of one call and its stream are on one
//   device; a call that mixes devices, dtypes or shapes wrongly throws
//   tfm::Error with a sentence naming the op and the offending tensor.
// - Outputs marked `=` are written; outputs marked `+=` are accumulated.
//   Parameter gradients accumulate; activation gradients are written, except
//   on the residual stream.
// - "saves" names what forward keeps for backward.
// - Dispatch is one switch on the device in kernels/ops.cc; implementations
//   live in kernels/cpu/NAME.cc and kernels/cuda/NAME.cu. A CPU-only build
//   answers a CUDA tensor with "unsupported device: cuda (built without CUDA)".
// - CPU ops run in f32 and, for tests, f64. CUDA ops take f32, bf16 or f16
//   storage and compute in f32.
// - Work is queued on `stream`; on CUDA the call returns before it is done.
#pragma once

#include "libcore/rng.h"
#include "libcore/stream.h"
#include "libcore/tensor.h"

namespace tfm::ops {

// ---------------------------------------------------------------- GEMM family

struct GemmOptions {
  bool trans_a = false;  // op(A) = A^T
  bool trans_b = false;  // op(B) = B^T
  float alpha = 1.0f;
  float beta = 0.0f;     // 0: C is written (=); 1: C is accumulated (+=)
  bool relu = false;     // apply max(0, .) last (the feed-forward's first half)
  bool tf32 = false;     // CUDA, f32 inputs: allow TF32 tensor cores
};

// C = act(alpha * op(A) op(B) + beta * C + bias)
//   A: (G, M, K), or (G, K, M) with trans_a
//   B: (G, K, N), or (G, N, K) with trans_b
//   C: (G, M, N)          =  (beta 0)  or  +=  (beta 1)
//   bias: (N), optional (an empty view), broadcast over every row
// G is every dimension before the last two, flattened (none: G = 1). A or B
// may hold one matrix (rank 2) that every batch entry shares, as a weight
// shared across (B, H) does. Accumulation is in f32 (f64 for f64 tensors).
// dtypes: CPU A = B = C = bias in {f32, f64}; CUDA A = B in {f32, bf16, f16},
// C and bias either the same as A or f32.
void gemm(const TensorView& a, const TensorView& b, const TensorView& c,
          const GemmOptions& options, const Stream& stream, const TensorView& bias = {});

// --------------------------------------------------------------- elementwise

// y = a + b                                    (same shape; y =; y may be a or b)
void add(const TensorView& a, const TensorView& b, const TensorView& y, const Stream& stream);

// y = max(0, x)                                (y =; saves y, whose sign is the mask)
void relu_forward(const TensorView& x, const TensorView& y, const Stream& stream);

// dx = dy * (y > 0)                            (dx =; dx may be dy)
void relu_backward(const TensorView& y, const TensorView& dy, const TensorView& dx,
                   const Stream& stream);

// out[i] = lo + (hi - lo) * u_i, u_i = uniform01(philox_bits(key, i)) in [0, 1)
//                                             (out =; rounding may reach hi itself)
// The same key gives the same numbers on every device (libcore/rng.h).
void uniform(const TensorView& out, const RngKey& key, float lo, float hi, const Stream& stream);

}  // namespace tfm::ops
