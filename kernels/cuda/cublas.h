// cuBLAS and cuBLASLt, opened on the first GEMM on a GPU instead of linked.
//
// Linked, they are mapped and relocated at every start of every program
// that could run a GEMM (some 600 MB of libraries): tens of milliseconds
// and about 200 MB resident before main, on the CPU too, and a CUDA build
// would not start at all where the toolkit's libraries are missing. Opened
// here, a CUDA build starts as fast as a CPU one, runs on the CPU without
// them, and the first GEMM on a GPU opens them: by soname (LD_LIBRARY_PATH,
// the loader's cache), else from the toolkit tfm was built with; failing
// both, an Error names the library and where it was looked for.
//
// Every cuBLAS function tfm calls is a member of CublasApi of the
// function's own type, under the function's name: cublas().cublasLtMatmul(...).
// (The names cublas_v2.h defines as macros, such as cublasCreate for
// cublasCreate_v2, expand in the member names and the calls alike, and the
// symbol looked up is the expanded one.)
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

namespace tfm::ops::cuda {

// libcublas.so.N's functions, then libcublasLt.so.N's.
// (And cublasGemmStridedBatchedEx, a member of its own below.)
#define TFM_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate) X(cublasDestroy) X(cublasSetStream) X(cublasSetWorkspace)
#define TFM_CUBLASLT_FUNCTIONS(X)                                                          \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmul) X(cublasLtMatmulAlgoGetHeuristic) \
  X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)                             \
  X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatmulPreferenceCreate)                    \
  X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)

// cublas_api.h overloads cublasGemmStridedBatchedEx with an inline C++
// wrapper that takes the compute type as a cudaDataType; this is the
// library's own function (cublas.cu checks that it is declared so).
using CublasGemmStridedBatchedEx = cublasStatus_t (*)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
    cudaDataType, int, long long, const void*, cudaDataType, int, long long, const void*, void*,
    cudaDataType, int, long long, int, cublasComputeType_t, cublasGemmAlgo_t);

struct CublasApi {
#define TFM_CUBLAS_MEMBER(name) decltype(&::name) name = nullptr;
  TFM_CUBLAS_FUNCTIONS(TFM_CUBLAS_MEMBER)
  TFM_CUBLASLT_FUNCTIONS(TFM_CUBLAS_MEMBER)
#undef TFM_CUBLAS_MEMBER
  CublasGemmStridedBatchedEx cublasGemmStridedBatchedEx = nullptr;
};

// Opens both libraries on the first call (thread-safe; never closed, so
// handles released at exit still find their functions). Throws Error when
// a library or one of its functions cannot be found; every later call
// throws the same.
const CublasApi& cublas();

}  // namespace tfm::ops::cuda
