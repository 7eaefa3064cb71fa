// The check of every CUDA runtime call, for the base layer (devices,
// streams, memory) and everything above it; kernels/cuda/check.h adds
// cuBLAS's and the kernel launch's.
//
// A failure throws tfm::Error naming the expression, CUDA's error string,
// file:line and the current device, e.g.
//   CUDA call cudaMalloc(&p, n) failed on cuda:0: out of memory (libcore/base/memory.cc:88)
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "libcore/base/error.h"

namespace tfm::cuda {

[[noreturn]] inline void throw_cuda_error(const char* what, const char* detail, const char* file,
                                          int line) {
  int device = -1;
  cudaGetDevice(&device);
  throw Error("CUDA call " + std::string(what) + " failed on cuda:" + std::to_string(device) +
              ": " + detail + " (" + file + ":" + std::to_string(line) + ")");
}

}  // namespace tfm::cuda

#define TFM_CUDA_CHECK(expr)                                                                \
  do {                                                                                      \
    cudaError_t tfm_err_ = (expr);                                                          \
    if (tfm_err_ != cudaSuccess) {                                                          \
      cudaGetLastError();                                                                   \
      ::tfm::cuda::throw_cuda_error(#expr, cudaGetErrorString(tfm_err_), __FILE__, __LINE__); \
    }                                                                                       \
  } while (0)
