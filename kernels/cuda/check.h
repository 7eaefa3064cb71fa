// Checks for every CUDA runtime call, cuBLAS call and kernel launch.
//
// A failure throws tfm::Error naming the expression, CUDA's error string,
// file:line and the current device, e.g.
//   CUDA call cudaMalloc(&p, n) failed on cuda:0: out of memory (kernels/cuda/gemm.cu:88)
// Usable from .cu and from the device layer's .cc files.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime.h>

#include <string>

#include "libcore/error.h"

namespace tfm::cuda {

[[noreturn]] inline void throw_cuda_error(const char* what, const char* detail, const char* file,
                                          int line) {
  int device = -1;
  cudaGetDevice(&device);
  throw Error("CUDA call " + std::string(what) + " failed on cuda:" + std::to_string(device) +
              ": " + detail + " (" + file + ":" + std::to_string(line) + ")");
}

const char* cublas_status_string(cublasStatus_t status);

}  // namespace tfm::cuda

#define TFM_CUDA_CHECK(expr)                                                                \
  do {                                                                                      \
    cudaError_t tfm_err_ = (expr);                                                          \
    if (tfm_err_ != cudaSuccess) {                                                          \
      cudaGetLastError();                                                                   \
      ::tfm::cuda::throw_cuda_error(#expr, cudaGetErrorString(tfm_err_), __FILE__, __LINE__); \
    }                                                                                       \
  } while (0)

#define TFM_CUBLAS_CHECK(expr)                                                              \
  do {                                                                                      \
    cublasStatus_t tfm_st_ = (expr);                                                        \
    if (tfm_st_ != CUBLAS_STATUS_SUCCESS)                                                   \
      ::tfm::cuda::throw_cuda_error(#expr, ::tfm::cuda::cublas_status_string(tfm_st_),      \
                                    __FILE__, __LINE__);                                    \
  } while (0)

// After every <<<...>>> launch: catches bad configurations at the launch site.
#define TFM_CHECK_LAUNCH() TFM_CUDA_CHECK(cudaGetLastError())
