// OpenBLAS, loaded so that it always runs its fastest kernel for this CPU.
//
// OpenBLAS picks its kernel ("core") once, when the library initializes,
// from its own table of CPU models. On CPUs that table does not know (new
// models, or a hypervisor that reports an odd model number) it can fall back
// to a generic core that runs sgemm 4-5x slower, even though the CPU has
// AVX-512. tfm therefore does not link OpenBLAS: on first use it reads the
// CPU's features itself (cpuid and the OS's saved-state mask), names the
// matching core in OPENBLAS_CORETYPE, and only then loads the library with
// dlopen. A core the user set in OPENBLAS_CORETYPE is respected as given.
#pragma once

#include <cstddef>
#include <string>

namespace tfm::ops::cpu {

// CBLAS enums, as every CBLAS implementation numbers them.
enum CblasOrder { CblasRowMajor = 101, CblasColMajor = 102 };
enum CblasTranspose { CblasNoTrans = 111, CblasTrans = 112 };

struct Blas {
  using Sgemm = void (*)(CblasOrder, CblasTranspose, CblasTranspose, int, int, int, float,
                         const float*, int, const float*, int, float, float*, int);
  using Dgemm = void (*)(CblasOrder, CblasTranspose, CblasTranspose, int, int, int, double,
                         const double*, int, const double*, int, double, double*, int);
  Sgemm sgemm = nullptr;
  Dgemm dgemm = nullptr;

  std::string library;      // the file dlopen loaded
  std::string core;         // the core OpenBLAS runs, e.g. "Cooperlake"
  std::string config;       // openblas_get_config()
  std::string core_source;  // why this core: chosen by tfm, set by the user, ...
  int threads = 0;
  bool openmp = false;      // the OpenMP build: safe to call from a parallel region
};

// Loads OpenBLAS on first call (thread-safe) and returns it. Throws Error
// with an install hint when no OpenBLAS can be loaded.
const Blas& blas();

// OpenBLAS's GEMM buffers: one of 128 MiB (and a page) for each of its
// threads, mapped on first use and kept (ops::library_memory_bytes).
size_t blas_buffer_bytes();
// Error unless that much address space (and a margin) can be mapped now.
void check_blas_memory();

// The OpenBLAS core name that fits this CPU's features ("Cooperlake",
// "SkylakeX", "Haswell", "Zen"), or "" when OpenBLAS's own choice is best.
// `why` gets a short description of the features found.
std::string openblas_core_for_this_cpu(std::string* why = nullptr);

}  // namespace tfm::ops::cpu
