// The op catalogue: every numeric op of tfm, declared once, with its math,
// in the header of its family (included below). Callers include this file.
//
// Contract for every op of the catalogue:
// - Tensors are dense row-major TensorViews; shapes use the alphabet of
//   libcore/base/tensor.h. All tensors of one call and its stream are on one
//   device; a call that mixes devices, dtypes or shapes wrongly throws
//   tfm::Error with a sentence naming the op and the offending tensor.
// - Outputs marked `=` are written; outputs marked `+=` are accumulated.
//   Parameter gradients accumulate; activation gradients are written, except
//   on the residual stream.
// - "saves" names what forward keeps for backward.
// - Each family of ops, NAME, has four files: kernels/NAME.h declares its
//   ops and the template each device implements (impl::OP<D>, declared once
//   for both); kernels/NAME.cc validates a call and dispatches it through
//   the one switch on the device (on_device, kernels/dispatch.h);
//   kernels/cpu/NAME.cc and kernels/cuda/NAME.cu implement it. A CPU-only
//   build answers a CUDA tensor with "unsupported device: cuda (built
//   without CUDA)".
// - CPU ops run in f32 and, for tests, f64; all float tensors of a call share
//   one dtype. CUDA ops take f32, bf16 or f16 storage and compute in f32;
//   there an op's parameters (table, gamma, beta) and parameter gradients
//   (dtable, dgamma, dbeta, sum_rows' out) may be f32 while its activations
//   are bf16 or f16 (fp32 master weights: docs/architecture.md). Saved
//   statistics (mean, rstd) and sums are f32 (f64 for f64 inputs). Ids and
//   lengths are i32.
// - Work is queued on `stream`; on CUDA the call returns before it is done.
// - Indices (ids, targets, lengths) out of range throw on the CPU. On CUDA,
//   where a kernel cannot throw, they are made harmless instead: an id's row
//   is zero (forward) or skipped (backward), a target >= V counts as
//   padding, a length over the key count is clamped. Callers validate ids on
//   the host before they reach a GPU (the model does).
#pragma once

#include "libcore/base/tensor.h"

namespace tfm::ops {

// The dtype of saved statistics (mean, rstd) and sums for tensors of dtype
// t (the contract above): f64 for f64, f32 otherwise.
inline DType stats_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

}  // namespace tfm::ops

#include "kernels/adam.h"
#include "kernels/attention.h"
#include "kernels/decode.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/gemm_int8.h"
#include "kernels/layernorm.h"
#include "kernels/loss.h"
#include "kernels/reduce.h"
