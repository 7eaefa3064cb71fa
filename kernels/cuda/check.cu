#include "kernels/cuda/check.h"

namespace tfm::cuda {

const char* cublas_status_string(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "cuBLAS not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "cuBLAS could not allocate memory";
    case CUBLAS_STATUS_INVALID_VALUE: return "cuBLAS got an invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "cuBLAS: not supported on this GPU architecture";
    case CUBLAS_STATUS_MAPPING_ERROR: return "cuBLAS mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "cuBLAS kernel failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "cuBLAS internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "cuBLAS: operation not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "cuBLAS license error";
    default: return "unknown cuBLAS status";
  }
}

}  // namespace tfm::cuda
