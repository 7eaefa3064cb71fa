// CUDA GEMM family (gemm.h) on cuBLASLt, with bias and ReLU fused into the
// matmul's epilogue. Where cuBLASLt offers no algorithm (unusual alignments),
// or the bias is under 16 bytes aligned, it falls back to
// cublasGemmStridedBatchedEx plus a separate epilogue pass.
//
// Row-major to column-major: cuBLAS is column-major, and a row-major (R, C)
// matrix is the column-major (C, R) one. So C = op(A) op(B) is computed as
// C^T = op(B)^T op(A)^T: B goes in as cuBLAS's first operand, A second,
// m' = N, n' = M, and the bias (one value per row of C^T) broadcasts along C's
// rows as gemm.h promises.
//
// A training step calls the GEMM about 380 times over a few dozen distinct
// problems, so each stream keeps a plan per problem (descriptors, layouts
// and the heuristic's algorithm, or "none: fall back"), keyed by everything
// that decides them: shapes, pitches, transposes, dtypes, epilogue and the
// operands' alignments. A repeated problem costs a hash lookup and the
// cublasLtMatmul call. cuBLAS itself is opened on the first GEMM (cublas.h).
#include <memory>
#include <unordered_map>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cublas.h"
#include "kernels/gemm.h"

namespace tfm::ops::cuda {

using impl::GemmShape;

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;  // cuBLAS's recommendation for Hopper

// Everything that decides a cuBLASLt plan.
struct PlanKey {
  int64_t batch, m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c;
  DType ab, c;
  bool trans_a, trans_b, tf32, bias, relu;
  uint32_t align_a, align_b, align_c;
  friend bool operator==(const PlanKey&, const PlanKey&) = default;
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
    const auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    for (int64_t v : {k.batch, k.m, k.n, k.k, k.lda, k.ldb, k.ldc, k.stride_a, k.stride_b, k.stride_c})
      mix(static_cast<uint64_t>(v));
    mix(static_cast<uint64_t>(k.ab) << 8 | static_cast<uint64_t>(k.c));
    mix(uint64_t(k.trans_a) | uint64_t(k.trans_b) << 1 | uint64_t(k.tf32) << 2 |
        uint64_t(k.bias) << 3 | uint64_t(k.relu) << 4);
    mix(uint64_t(k.align_a) | uint64_t(k.align_b) << 16 | uint64_t(k.align_c) << 32);
    return static_cast<size_t>(h);
  }
};

// The cuBLASLt descriptors and algorithm of one problem. found false: no
// algorithm, the fallback runs.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;

  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    if (c) cublas().cublasLtMatrixLayoutDestroy(c);
    if (b) cublas().cublasLtMatrixLayoutDestroy(b);
    if (a) cublas().cublasLtMatrixLayoutDestroy(a);
    if (desc) cublas().cublasLtMatmulDescDestroy(desc);
  }
};

// Handles, workspace and plans of one stream, kept in the stream's
// kernel_state() slot: created on the stream's first GEMM, released with
// the stream.
struct BlasContext {
  int device = 0;
  cublasLtHandle_t lt = nullptr;
  cublasHandle_t blas = nullptr;
  void* workspace = nullptr;
  std::unordered_map<PlanKey, std::unique_ptr<LtPlan>, PlanKeyHash> plans;

  ~BlasContext() {
    cudaSetDevice(device);
    plans.clear();
    if (workspace) cudaFree(workspace);
    if (blas) cublas().cublasDestroy(blas);
    if (lt) cublas().cublasLtDestroy(lt);
  }
};

BlasContext& context_for(const Stream& stream) {
  std::shared_ptr<void>& slot = stream.kernel_state();
  if (!slot) {
    auto ctx = std::make_shared<BlasContext>();
    ctx->device = stream.device().index;
    TFM_CUBLAS_CHECK(cublas().cublasLtCreate(&ctx->lt));
    TFM_CUBLAS_CHECK(cublas().cublasCreate(&ctx->blas));
    TFM_CUDA_CHECK(cudaMalloc(&ctx->workspace, kWorkspaceBytes));
    // The stream first: since cuBLAS 12, cublasSetStream resets the handle's
    // workspace to the default pool, undoing an earlier cublasSetWorkspace.
    TFM_CUBLAS_CHECK(cublas().cublasSetStream(ctx->blas, native(stream)));
    TFM_CUBLAS_CHECK(cublas().cublasSetWorkspace(ctx->blas, ctx->workspace, kWorkspaceBytes));
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

// Largest power of two (<= 256) that divides every address an operand's
// matrices start at and every row: the pointer, the row pitch and, when
// batched, the matrix pitch, in bytes. cuBLASLt only returns algorithms
// whose alignment needs the operands meet, and it takes these as promises
// for every matrix of a batch (a stride of tq * tk bf16 scores that is odd
// leaves each second matrix 2-byte aligned).
uint32_t alignment_of(const void* p, int64_t ld, int64_t stride, int64_t batch, DType t) {
  const uint64_t el = dtype_size(t);
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | static_cast<uint64_t>(ld) * el | 256u;
  if (batch > 1) bits |= static_cast<uint64_t>(stride) * el;
  return static_cast<uint32_t>(bits & (~bits + 1));  // the lowest set bit
}

template <typename T>
void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& value) {
  TFM_CUBLAS_CHECK(cublas().cublasLtMatmulDescSetAttribute(d, attr, &value, sizeof(value)));
}

template <typename T>
void set_attr(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, const T& value) {
  TFM_CUBLAS_CHECK(cublas().cublasLtMatrixLayoutSetAttribute(l, attr, &value, sizeof(value)));
}

template <typename T>
void set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const T& value) {
  TFM_CUBLAS_CHECK(cublas().cublasLtMatmulPreferenceSetAttribute(p, attr, &value, sizeof(value)));
}

cublasLtMatrixLayout_t make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                                   int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  TFM_CUBLAS_CHECK(cublas().cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld));
  if (batch > 1) {
    set_attr(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, static_cast<int32_t>(batch));
    set_attr(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
  }
  return l;
}

// Builds the plan of `key`: descriptors, layouts, and the heuristic's best
// algorithm for the operands' alignments.
std::unique_ptr<LtPlan> make_plan(const PlanKey& key, BlasContext& ctx) {
  auto plan = std::make_unique<LtPlan>();
  const cudaDataType_t ab_type = cuda_type(key.ab), c_type = cuda_type(key.c);
  TFM_CUBLAS_CHECK(cublas().cublasLtMatmulDescCreate(&plan->desc, compute_type(key.ab, key.tf32),
                                                     CUDA_R_32F));
  // Swapped operands (see the top of the file): first = B, second = A.
  const cublasOperation_t op_first = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_attr(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, op_first);
  set_attr(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, op_second);
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (key.bias) {
    epilogue = key.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    set_attr(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(c_type));
  } else if (key.relu) {
    epilogue = CUBLASLT_EPILOGUE_RELU;
  }
  set_attr(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);

  // Column-major shapes as stored: B row-major (b.dim(-2), ldb) is (ldb, b.dim(-2)).
  const int64_t b_rows = key.trans_b ? key.k : key.n, b_cols = key.trans_b ? key.n : key.k;
  const int64_t a_rows = key.trans_a ? key.m : key.k, a_cols = key.trans_a ? key.k : key.m;
  plan->a = make_layout(ab_type, b_rows, b_cols, key.ldb, key.batch, key.stride_b);
  plan->b = make_layout(ab_type, a_rows, a_cols, key.lda, key.batch, key.stride_a);
  plan->c = make_layout(c_type, key.n, key.m, key.ldc, key.batch, key.stride_c);

  cublasLtMatmulPreference_t pref = nullptr;
  TFM_CUBLAS_CHECK(cublas().cublasLtMatmulPreferenceCreate(&pref));
  const std::unique_ptr<void, void (*)(void*)> pref_guard(pref, [](void* p) {
    cublas().cublasLtMatmulPreferenceDestroy(static_cast<cublasLtMatmulPreference_t>(p));
  });
  set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(kWorkspaceBytes));
  // cuBLASLt's A is our B and its B our A (swapped operands).
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c);

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublas().cublasLtMatmulAlgoGetHeuristic(
      ctx.lt, plan->desc, plan->a, plan->b, plan->c, plan->c, pref, 1, &result, &found);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return plan;  // found stays false
  TFM_CUBLAS_CHECK(st);
  if (found > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
    plan->algo = result.algo;
    plan->found = true;
  }
  return plan;
}

// Returns false when cuBLASLt has no algorithm for this problem.
bool gemm_lt(const GemmShape& s, const TensorView& a, const TensorView& b, const TensorView& c,
             const TensorView& bias, const GemmOptions& o, BlasContext& ctx, cudaStream_t stream) {
  // The epilogue reads the bias with vector loads: under 16 bytes aligned,
  // the fallback adds it.
  if (!bias.empty() && reinterpret_cast<uintptr_t>(bias.data()) % 16 != 0) return false;
  const PlanKey key{s.batch, s.m, s.n, s.k, s.lda, s.ldb, s.ldc, s.stride_a, s.stride_b, s.stride_c,
                    a.dtype(), c.dtype(), o.trans_a, o.trans_b, o.tf32, !bias.empty(), o.relu,
                    alignment_of(a.data(), s.lda, s.stride_a, s.batch, a.dtype()),
                    alignment_of(b.data(), s.ldb, s.stride_b, s.batch, b.dtype()),
                    alignment_of(c.data(), s.ldc, s.stride_c, s.batch, c.dtype())};
  auto it = ctx.plans.find(key);
  if (it == ctx.plans.end()) it = ctx.plans.emplace(key, make_plan(key, ctx)).first;
  LtPlan& plan = *it->second;
  if (!plan.found) return false;
  if (!bias.empty()) {
    const void* bias_ptr = bias.data();
    set_attr(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_ptr);
  }
  const float alpha = o.alpha, beta = o.beta;
  TFM_CUBLAS_CHECK(cublas().cublasLtMatmul(ctx.lt, plan.desc, &alpha, b.data(), plan.a, a.data(),
                                           plan.b, &beta, c.data(), plan.c, c.data(), plan.c,
                                           &plan.algo, ctx.workspace, kWorkspaceBytes, stream));
  return true;
}

void gemm_fallback(const GemmShape& s, const TensorView& a, const TensorView& b,
                   const TensorView& c, const TensorView& bias, const GemmOptions& o,
                   BlasContext& ctx, cudaStream_t stream) {
  for (int64_t d : {s.m, s.n, s.k, s.batch})
    if (d > INT32_MAX) throw Error("gemm: dimension " + std::to_string(d) + " is over cuBLAS's limit");
  // ctx.blas is bound to this stream and its workspace (context_for).
  const float alpha = o.alpha, beta = o.beta;
  TFM_CUBLAS_CHECK(cublas().cublasGemmStridedBatchedEx(
      ctx.blas, o.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, o.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      static_cast<int>(s.n), static_cast<int>(s.m), static_cast<int>(s.k), &alpha, b.data(),
      cuda_type(b.dtype()), static_cast<int>(s.ldb), s.stride_b, a.data(), cuda_type(a.dtype()),
      static_cast<int>(s.lda), s.stride_a, &beta, c.data(), cuda_type(c.dtype()),
      static_cast<int>(s.ldc), s.stride_c, static_cast<int>(s.batch),
      compute_type(a.dtype(), o.tf32), CUBLAS_GEMM_DEFAULT));
  bias_relu_inplace(c, s.batch * s.m, s.n, bias, o.relu, stream);
}

}  // namespace
}  // namespace tfm::ops::cuda

namespace tfm::ops::impl {
using namespace cuda;  // the helpers above

template <>
void gemm<DeviceType::cuda>(const GemmShape& s, const TensorView& a, const TensorView& b,
                            const TensorView& c, const TensorView& bias, const GemmOptions& o,
                            const Stream& stream) {
  BlasContext& ctx = context_for(stream);
  if (!gemm_lt(s, a, b, c, bias, o, ctx, native(stream)))
    gemm_fallback(s, a, b, c, bias, o, ctx, native(stream));
}

}  // namespace tfm::ops::impl

// dtypes: A = B in {f32, bf16, f16}; C and bias = A's type or f32 (kernels/gemm.cc).
