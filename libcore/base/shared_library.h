// A shared library opened at its first use instead of linked (cuBLAS:
// kernels/cuda/cublas.h; NCCL: libcore/dist/nccl.cc): by its soname, as the
// loader finds it (LD_LIBRARY_PATH, its cache), else in the folder it was
// found in at build time. Header-only, for CUDA files too.
#pragma once

#include <dlfcn.h>

#include <string>

namespace tfm {

// The library's handle (never closed), or nullptr with `why` naming both
// places and what the loader said of each.
inline void* open_shared_library(const std::string& soname, const std::string& folder, std::string& why) {
  if (void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  const std::string first = dlerror();
  const std::string path = folder + "/" + soname;
  if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  why = first + "; nor " + path;
  return nullptr;
}

}  // namespace tfm
