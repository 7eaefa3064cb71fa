// Checks for the op layer's CUDA code: every runtime call (TFM_CUDA_CHECK,
// libcore/base/cuda_check.h), every cuBLAS call and every kernel launch. A
// failure throws tfm::Error naming the expression, the library's error
// string, file:line and the current device.
#pragma once

#include <cublas_api.h>

#include "libcore/base/cuda_check.h"

namespace tfm::cuda {

const char* cublas_status_string(cublasStatus_t status);

}  // namespace tfm::cuda

#define TFM_CUBLAS_CHECK(expr)                                                              \
  do {                                                                                      \
    cublasStatus_t tfm_st_ = (expr);                                                        \
    if (tfm_st_ != CUBLAS_STATUS_SUCCESS)                                                   \
      ::tfm::cuda::throw_cuda_error(#expr, ::tfm::cuda::cublas_status_string(tfm_st_),      \
                                    __FILE__, __LINE__);                                    \
  } while (0)

// After every <<<...>>> launch: catches bad configurations at the launch site.
#define TFM_CHECK_LAUNCH() TFM_CUDA_CHECK(cudaGetLastError())
