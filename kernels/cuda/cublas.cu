// cuBLAS and cuBLASLt opened at run time (cublas.h). Host code only.
#include "kernels/cuda/cublas.h"

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "libcore/base/error.h"
#include "libcore/base/shared_library.h"

#ifndef TFM_CUDA_LIBRARY_DIR
#define TFM_CUDA_LIBRARY_DIR "/usr/local/cuda/lib64"
#endif

namespace tfm::ops::cuda {
namespace {

// The library's function has the type cublas.h gives it: an overload of
// that type exists, or this does not compile (decltype: nothing linked).
static_assert(std::is_same_v<decltype(static_cast<CublasGemmStridedBatchedEx>(
                                 &::cublasGemmStridedBatchedEx)),
                             CublasGemmStridedBatchedEx>);

#define TFM_CUBLAS_STRING(name) #name
#define TFM_CUBLAS_STRING_OF(name) TFM_CUBLAS_STRING(name)

// The library by soname, else in the toolkit's folder; an Error naming
// both places when neither has it.
void* open_library(const std::string& soname) {
  std::string why;
  if (void* handle = open_shared_library(soname, TFM_CUDA_LIBRARY_DIR, why)) return handle;
  throw Error("cannot load " + soname + " (" + why + "): a GEMM on a GPU needs cuBLAS of CUDA " +
              TFM_CUBLAS_STRING_OF(CUBLAS_VER_MAJOR) +
              "; install the CUDA toolkit's libraries or add their folder to LD_LIBRARY_PATH");
}

template <typename F>
void find(F& function, void* library, const char* name, const std::string& soname) {
  function = reinterpret_cast<F>(dlsym(library, name));
  if (!function) throw Error(soname + " has no " + name + ": not the cuBLAS tfm was built with");
}

CublasApi open_cublas() {
  const std::string major = TFM_CUBLAS_STRING_OF(CUBLAS_VER_MAJOR);
  // cuBLASLt first: libcublas needs it, and finds it loaded by its soname.
  const std::string lt_name = "libcublasLt.so." + major, blas_name = "libcublas.so." + major;
  void* lt = open_library(lt_name);
  void* blas = open_library(blas_name);
  CublasApi api;
#define TFM_CUBLAS_FIND(name) find(api.name, blas, TFM_CUBLAS_STRING_OF(name), blas_name);
#define TFM_CUBLASLT_FIND(name) find(api.name, lt, TFM_CUBLAS_STRING_OF(name), lt_name);
  TFM_CUBLAS_FUNCTIONS(TFM_CUBLAS_FIND)
  TFM_CUBLASLT_FUNCTIONS(TFM_CUBLASLT_FIND)
  find(api.cublasGemmStridedBatchedEx, blas, "cublasGemmStridedBatchedEx", blas_name);
#undef TFM_CUBLAS_FIND
#undef TFM_CUBLASLT_FIND
  return api;
}

}  // namespace

const CublasApi& cublas() { return once_or_error([] { return open_cublas(); }); }

}  // namespace tfm::ops::cuda
