// CUDA GEMM family (ops.h) on cuBLASLt, with bias and ReLU fused into the
// matmul's epilogue. Where cuBLASLt offers no algorithm (unusual alignments),
// it falls back to cublasGemmStridedBatchedEx plus a separate epilogue pass.
//
// Row-major to column-major: cuBLAS is column-major, and a row-major (R, C)
// matrix is the column-major (C, R) one. So C = op(A) op(B) is computed as
// C^T = op(B)^T op(A)^T: B goes in as cuBLAS's first operand, A second,
// m' = N, n' = M, and the bias (one value per row of C^T) broadcasts along C's
// rows as ops.h promises.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <memory>

#include "kernels/cuda/common.cuh"
#include "kernels/detail.h"

namespace tfm::ops::cuda {
namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;  // cuBLAS's recommendation for Hopper

// Handles and workspace of one stream, kept in the stream's kernel_state()
// slot: created on the stream's first GEMM, released with the stream.
struct BlasContext {
  int device = 0;
  cublasLtHandle_t lt = nullptr;
  cublasHandle_t blas = nullptr;
  void* workspace = nullptr;

  ~BlasContext() {
    cudaSetDevice(device);
    if (workspace) cudaFree(workspace);
    if (blas) cublasDestroy(blas);
    if (lt) cublasLtDestroy(lt);
  }
};

BlasContext& context_for(const Stream& stream) {
  std::shared_ptr<void>& slot = stream.kernel_state();
  if (!slot) {
    auto ctx = std::make_shared<BlasContext>();
    ctx->device = stream.device().index;
    TFM_CUBLAS_CHECK(cublasLtCreate(&ctx->lt));
    TFM_CUBLAS_CHECK(cublasCreate(&ctx->blas));
    TFM_CUDA_CHECK(cudaMalloc(&ctx->workspace, kWorkspaceBytes));
    TFM_CUBLAS_CHECK(cublasSetWorkspace(ctx->blas, ctx->workspace, kWorkspaceBytes));
    slot = std::move(ctx);
  }
  return *static_cast<BlasContext*>(slot.get());
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default: unsupported_dtype("gemm", t);
  }
}

cublasComputeType_t compute_type(DType a, bool tf32) {
  return a == DType::f32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

// Largest power of two (<= 256) that divides the address: cuBLASLt only
// returns algorithms whose alignment needs the operands meet.
uint32_t alignment_of(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && (v % a) != 0) a /= 2;
  return a;
}

template <typename T>
void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& value) {
  TFM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &value, sizeof(value)));
}

template <typename T>
void set_attr(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, const T& value) {
  TFM_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, attr, &value, sizeof(value)));
}

// RAII for the cuBLASLt descriptors of one call.
struct LtCall {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtCall() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

cublasLtMatrixLayout_t make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                                   int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  TFM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld));
  if (batch > 1) {
    set_attr(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, static_cast<int32_t>(batch));
    set_attr(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
  }
  return l;
}

// Returns false when cuBLASLt has no algorithm for this problem.
bool gemm_lt(const GemmShape& s, const TensorView& a, const TensorView& b, const TensorView& c,
             const TensorView& bias, const GemmOptions& o, BlasContext& ctx, cudaStream_t stream) {
  const cudaDataType_t ab_type = cuda_type(a.dtype()), c_type = cuda_type(c.dtype());
  LtCall call;
  TFM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&call.desc, compute_type(a.dtype(), o.tf32), CUDA_R_32F));
  // Swapped operands (see the top of the file): first = B, second = A.
  const cublasOperation_t op_first = o.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = o.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_attr(call.desc, CUBLASLT_MATMUL_DESC_TRANSA, op_first);
  set_attr(call.desc, CUBLASLT_MATMUL_DESC_TRANSB, op_second);
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (!bias.empty()) {
    epilogue = o.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    set_attr(call.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.data());
    set_attr(call.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(c_type));
  } else if (o.relu) {
    epilogue = CUBLASLT_EPILOGUE_RELU;
  }
  set_attr(call.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);

  // Column-major shapes as stored: B row-major (b.dim(-2), ldb) is (ldb, b.dim(-2)).
  const int64_t b_rows = o.trans_b ? s.k : s.n, b_cols = o.trans_b ? s.n : s.k;
  const int64_t a_rows = o.trans_a ? s.m : s.k, a_cols = o.trans_a ? s.k : s.m;
  call.a = make_layout(ab_type, b_rows, b_cols, s.ldb, s.batch, s.stride_b);
  call.b = make_layout(ab_type, a_rows, a_cols, s.lda, s.batch, s.stride_a);
  call.c = make_layout(c_type, s.n, s.m, s.ldc, s.batch, s.stride_c);

  TFM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&call.pref));
  const uint64_t workspace = kWorkspaceBytes;
  TFM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  const uint32_t align_a = alignment_of(b.data()), align_b = alignment_of(a.data()),
                 align_c = alignment_of(c.data());
  TFM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
  TFM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
  TFM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)));
  TFM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof(align_c)));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx.lt, call.desc, call.a, call.b,
                                                           call.c, call.c, call.pref, 1, &result,
                                                           &found);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || found == 0) return false;
  TFM_CUBLAS_CHECK(st);

  const float alpha = o.alpha, beta = o.beta;
  TFM_CUBLAS_CHECK(cublasLtMatmul(ctx.lt, call.desc, &alpha, b.data(), call.a, a.data(), call.b,
                                  &beta, c.data(), call.c, c.data(), call.c, &result.algo,
                                  ctx.workspace, kWorkspaceBytes, stream));
  return true;
}

void gemm_fallback(const GemmShape& s, const TensorView& a, const TensorView& b,
                   const TensorView& c, const TensorView& bias, const GemmOptions& o,
                   BlasContext& ctx, cudaStream_t stream) {
  for (int64_t d : {s.m, s.n, s.k, s.batch})
    if (d > INT32_MAX) throw Error("gemm: dimension " + std::to_string(d) + " is over cuBLAS's limit");
  TFM_CUBLAS_CHECK(cublasSetStream(ctx.blas, stream));
  const float alpha = o.alpha, beta = o.beta;
  TFM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      ctx.blas, o.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, o.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      static_cast<int>(s.n), static_cast<int>(s.m), static_cast<int>(s.k), &alpha, b.data(),
      cuda_type(b.dtype()), static_cast<int>(s.ldb), s.stride_b, a.data(), cuda_type(a.dtype()),
      static_cast<int>(s.lda), s.stride_a, &beta, c.data(), cuda_type(c.dtype()),
      static_cast<int>(s.ldc), s.stride_c, static_cast<int>(s.batch),
      compute_type(a.dtype(), o.tf32), CUBLAS_GEMM_DEFAULT));
  bias_relu_inplace(c, s.batch * s.m, s.n, bias, o.relu, stream);
}

}  // namespace

void gemm(const GemmShape& s, const TensorView& a, const TensorView& b, const TensorView& c,
          const TensorView& bias, const GemmOptions& o, const Stream& stream) {
  activate(stream.device());
  BlasContext& ctx = context_for(stream);
  if (!gemm_lt(s, a, b, c, bias, o, ctx, native(stream)))
    gemm_fallback(s, a, b, c, bias, o, ctx, native(stream));
}

}  // namespace tfm::ops::cuda

// dtypes: A = B in {f32, bf16, f16}; C and bias = A's type or f32 (ops.cc).
