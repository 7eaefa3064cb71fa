// cuda.libraries: the CUDA libraries tfm opens at run time (cuBLAS,
// kernels/cuda/cublas.h) open here and have every function tfm calls,
// under the symbol names the headers give them. Needs the CUDA toolkit's
// libraries, not a GPU: it runs wherever the CUDA device is built, so that
// a misspelt symbol or soname fails on the build machine rather than at
// the first GEMM on a GPU machine.
#include <dlfcn.h>

#include <cstdio>
#include <exception>

#include "kernels/cuda/cublas.h"

int main() {
  try {
    const tfm::ops::cuda::CublasApi& api = tfm::ops::cuda::cublas();
    int missing = 0;
    // Every member, in the order the lists give them.
    const auto check = [&](const void* f, const char* name) {
      Dl_info info{};
      if (f == nullptr || dladdr(f, &info) == 0) {
        std::printf("FAIL: %s: not found\n", name);
        ++missing;
      } else {
        std::printf("%s: %s\n", name, info.dli_fname);
      }
    };
#define TFM_CHECK_MEMBER(name) check(reinterpret_cast<const void*>(api.name), #name);
    TFM_CUBLAS_FUNCTIONS(TFM_CHECK_MEMBER)
    TFM_CUBLASLT_FUNCTIONS(TFM_CHECK_MEMBER)
#undef TFM_CHECK_MEMBER
    check(reinterpret_cast<const void*>(api.cublasGemmStridedBatchedEx), "cublasGemmStridedBatchedEx");
    return missing == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
