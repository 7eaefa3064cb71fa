// The GEMM family: fp32 (f64 for tests) matrix products, OpenBLAS or the
// row-invariant tiles on the CPU, cuBLASLt on a GPU; and the memory
// OpenBLAS takes beside the plans.
// Part of the op catalogue: kernels/ops.h gives the contract every op keeps.
#pragma once

#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"

namespace tfm::ops {

// ------------- gemm: the GEMM family (cpu/gemm.cc, gemm_rows.cc; cuda/gemm.cu)

struct GemmOptions {
  bool trans_a = false;  // op(A) = A^T
  bool trans_b = false;  // op(B) = B^T
  float alpha = 1.0f;
  float beta = 0.0f;     // 0: C is written (=); 1: C is accumulated (+=)
  bool relu = false;     // apply max(0, .) last (the feed-forward's first half)
  bool tf32 = false;     // CUDA, f32 inputs: allow TF32 tensor cores
  bool row_invariant = false;  // CPU: each row of C alone, in one fixed order, whatever the
                               // other rows (the decoder's batch invariance); see below
  const float* packed_b = nullptr;  // row_invariant, f32: B's values as pack_panels laid them
                                    // out, read instead of copying B into panels each call
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
// row_invariant (CPU; products x W^T: trans_b, not trans_a, B one matrix):
// every element of C is a dot product in one fixed order (kernels/cpu/
// gemm_rows.cc), so a row of C has the same bits whatever the other rows of
// A are, how many there are, where the row sits and how many threads run,
// and the same on every CPU. OpenBLAS promises none of that: its kernels sum
// an element by its place in a register block. Other shapes, and CUDA (no
// invariance is promised there: cuBLASLt picks its algorithm by M), ignore it.
void gemm(const TensorView& a, const TensorView& b, const TensorView& c,
          const GemmOptions& options, const Stream& stream, const TensorView& bias = {});

// The row-invariant GEMM copies B's rows into panels of 16 (B's column k
// of those rows contiguous) on every call. A weight that inference
// multiplies by every step can be laid out so once: w (N, K) f32 on the
// CPU into panels (panels_floats(N, K) floats, the last panel's rows past
// N zero), then GemmOptions::packed_b = panels with B = w: the same bits,
// without the copy (a rows [r0, r0 + n) view of w: panels + r0 K, r0 a
// multiple of kPanelRows).
constexpr int64_t kPanelRows = 16;
int64_t panels_floats(int64_t rows, int64_t cols);
void pack_panels(const TensorView& w, float* panels);

// ------------------------------------------ memory outside the plans (gemm.cc)
// Memory an op's library takes for itself, beside tfm's memory plans: on
// the CPU, OpenBLAS maps a GEMM buffer of 128 MiB for each thread that runs
// GEMMs, on its first one, and keeps it. 0 on CUDA (the workspaces of
// cuBLAS and cuBLASLt are planned).
size_t library_memory_bytes(Device device);
// Makes sure, before the first op, that that memory can still be had:
// OpenBLAS retries a failed mmap forever, so a process short of address
// space (ulimit -v) would hang in its first GEMM, deaf to SIGTERM. Maps and
// unmaps that much (and a margin for the threads' stacks) once; Error "out
// of memory: ..." saying how much is missing otherwise.
void check_library_memory(Device device);

}  // namespace tfm::ops

// The devices' implementations, declared once for both: gemm.cc calls
// impl::OP<D> through on_device once a call is valid; cpu/gemm.cc and
// cuda/gemm.cu define the specializations. Not for callers.
namespace tfm::ops::impl {

// One (batched, strided) row-major GEMM: C[g] = op(A[g]) op(B[g]), M x N x K.
// A stride of 0 means every batch entry shares one matrix.
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;                 // row pitch, in elements
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // matrix pitch, in elements
};

template <DeviceType D>
void gemm(const GemmShape& s, const TensorView& a, const TensorView& b, const TensorView& c,
          const TensorView& bias, const GemmOptions& o, const Stream& stream);

}  // namespace tfm::ops::impl
