#include "kernels/cpu/blas.h"

#include <dlfcn.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <tuple>

#include "libcore/base/error.h"

#ifndef TFM_OPENBLAS_OPENMP_PATH
#define TFM_OPENBLAS_OPENMP_PATH "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0"
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tfm::ops::cpu {
namespace {

#if defined(__x86_64__) || defined(__i386__)
struct X86Features {
  bool intel = false, amd = false;
  bool avx2 = false, fma = false, avx512 = false, avx512_bf16 = false;
};

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

X86Features detect_x86() {
  X86Features f;
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
  const unsigned max_leaf = a;
  f.intel = b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e;  // "GenuineIntel"
  f.amd = b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;    // "AuthenticAMD"
  __get_cpuid(1, &a, &b, &c, &d);
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28);
  f.fma = c & (1u << 12);
  if (!osxsave || !avx || max_leaf < 7) return f;
  // The OS must save the registers too: YMM (bits 1-2), and for AVX-512
  // the opmask and both ZMM halves (bits 5-7).
  const uint64_t xcr0 = xgetbv0();
  const bool os_avx = (xcr0 & 0x6) == 0x6;
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
  __cpuid_count(7, 0, a, b, c, d);
  const unsigned max_subleaf = a;
  f.avx2 = os_avx && (b & (1u << 5));
  // SkylakeX kernels use F, CD, BW, DQ and VL.
  const unsigned need = (1u << 16) | (1u << 17) | (1u << 28) | (1u << 30) | (1u << 31);
  f.avx512 = os_avx512 && (b & need) == need;
  if (f.avx512 && max_subleaf >= 1) {
    __cpuid_count(7, 1, a, b, c, d);
    f.avx512_bf16 = a & (1u << 5);
  }
  return f;
}
#endif

// OpenBLAS's BUFFER_SIZE on x86-64 (common_x86_64.h: 32 << 22), mapped with
// a page more (memory.c, alloc_mmap).
constexpr size_t kBlasBuffer = (size_t{32} << 22) + 4096;
// The threads that start with the first GEMM need stacks and heaps too.
constexpr size_t kMargin = size_t{64} << 20;
// The library and what it needs (libgomp, libgfortran) as dlopen maps
// them, with room to spare.
constexpr size_t kLibraryBytes = size_t{64} << 20;

std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / (1 << 20)); }

// "ulimit -v 976.6 MiB" for the limits in force, or "".
std::string limits_text() {
  std::string out;
  for (const auto& [resource, name] : {std::pair{RLIMIT_AS, "ulimit -v"}, {RLIMIT_DATA, "ulimit -d"}}) {
    rlimit r{};
    if (getrlimit(resource, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
      out += fmt::format("{}{} {}", out.empty() ? "" : ", ", name, mib(static_cast<double>(r.rlim_cur)));
  }
  return out;
}

// ", or use fewer threads (OMP_NUM_THREADS=1)" when there is more than one.
std::string fewer_threads(int threads) {
  return threads > 1 ? ", or use fewer threads (OMP_NUM_THREADS=1)" : "";
}

// The threads OpenBLAS 0.3's blas_get_cpu_number starts with: the first of
// OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS, OMP_NUM_THREADS that is positive,
// else every CPU this process may run on, never more than those CPUs.
int openblas_start_threads() {
  cpu_set_t set;
  int cpus = 1;
  if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = std::max(1, CPU_COUNT(&set));
  for (const char* name : {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && std::atoi(v) > 0) return std::min(std::atoi(v), cpus);
  }
  return cpus;
}

// Bytes this process has mapped (VmSize) and has as data (VmData), from
// /proc/self/status; 0 when it cannot be read.
size_t status_bytes(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  size_t kib = 0;
  const size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, field, n) == 0 && line[n] == ':') kib = std::strtoull(line + n + 1, nullptr, 10);
  std::fclose(f);
  return kib << 10;
}

// OpenBLAS maps a 128 MiB buffer for each of its threads while it starts,
// inside dlopen, and retries a mapping that fails forever (0.3.21's
// blas_memory_alloc): under an address-space or data limit too tight for it,
// dlopen would never return. So the room is checked before, against the
// threads OpenBLAS will start; one line names the limit.
void check_room_to_load() {
  const int threads = openblas_start_threads();
  const size_t buffers = static_cast<size_t>(threads) * kBlasBuffer;
  const size_t need = buffers + kLibraryBytes;
  for (const auto& [resource, name, field] :
       {std::tuple{RLIMIT_AS, "address-space limit (ulimit -v", "VmSize"},
        std::tuple{RLIMIT_DATA, "data limit (ulimit -d", "VmData"}}) {
    rlimit r{};
    if (getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) continue;
    const size_t used = status_bytes(field);
    if (used + need <= r.rlim_cur) continue;
    fail("out of memory: OpenBLAS maps {} for its GEMM buffers as it starts ({} thread{} x 128 MiB) and "
         "{} more for itself, and the {} {}, {} in use) leaves {}; raise the limit{}",
         mib(static_cast<double>(buffers)), threads, threads > 1 ? "s" : "",
         mib(static_cast<double>(kLibraryBytes)), name, mib(static_cast<double>(r.rlim_cur)),
         mib(static_cast<double>(used)),
         mib(static_cast<double>(r.rlim_cur > used ? r.rlim_cur - used : 0)), fewer_threads(threads));
  }
}

std::string getenv_string(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

Blas load() {
  Blas blas;
  const std::string user_core = getenv_string("OPENBLAS_CORETYPE");
  std::string why;
  const std::string chosen = user_core.empty() ? openblas_core_for_this_cpu(&why) : "";
  if (!user_core.empty())
    blas.core_source = "set by OPENBLAS_CORETYPE";
  else if (!chosen.empty())
    blas.core_source = "chosen by tfm for " + why;
  else
    blas.core_source = "detected by OpenBLAS";
  // OpenBLAS reads OPENBLAS_CORETYPE while it initializes inside dlopen;
  // the variable is removed again so child processes see the user's
  // environment unchanged.
  if (!chosen.empty()) setenv("OPENBLAS_CORETYPE", chosen.c_str(), 1);

  // The OpenMP build of OpenBLAS first: it shares libgomp's thread pool with
  // tfm's own OpenMP loops, where the pthreads build keeps a second pool
  // that spins in sched_yield while tfm's threads work (and the reverse),
  // a large share of a CPU training step (tests/bench/NOTES.md). Called from
  // inside a parallel
  // region, it also runs single-threaded instead of oversubscribing.
  check_room_to_load();
  void* handle = nullptr;
  for (const char* name : {TFM_OPENBLAS_OPENMP_PATH, "libopenblas.so.0", "libopenblas.so"}) {
    handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      blas.library = name;
      break;
    }
  }
  if (!chosen.empty()) unsetenv("OPENBLAS_CORETYPE");
  if (!handle) {
    const std::string why = dlerror();
    const std::string limits = limits_text();
    // "failed to map segment from shared object": the limit, not a missing package.
    if (!limits.empty() && (why.find("map") != std::string::npos || why.find("memory") != std::string::npos))
      fail("cannot load OpenBLAS under the process's limits ({}): {}; raise the limit", limits, why);
    fail("cannot load OpenBLAS ({}); install it with: apt-get install libopenblas0", why);
  }

  blas.sgemm = reinterpret_cast<Blas::Sgemm>(dlsym(handle, "cblas_sgemm"));
  blas.dgemm = reinterpret_cast<Blas::Dgemm>(dlsym(handle, "cblas_dgemm"));
  if (!blas.sgemm || !blas.dgemm) fail("{} has no cblas_sgemm/cblas_dgemm", blas.library);
  using Text = char* (*)();
  using Count = int (*)();
  if (auto corename = reinterpret_cast<Text>(dlsym(handle, "openblas_get_corename")))
    blas.core = corename();
  if (auto config = reinterpret_cast<Text>(dlsym(handle, "openblas_get_config")))
    blas.config = config();
  if (auto threads = reinterpret_cast<Count>(dlsym(handle, "openblas_get_num_threads")))
    blas.threads = threads();
  // 0 sequential, 1 pthreads, 2 OpenMP.
  if (auto parallel = reinterpret_cast<Count>(dlsym(handle, "openblas_get_parallel")))
    blas.openmp = parallel() == 2;
  return blas;
}

}  // namespace

std::string openblas_core_for_this_cpu(std::string* why) {
#if defined(__x86_64__) || defined(__i386__)
  const X86Features f = detect_x86();
  auto said = [&](const char* features, const char* core) {
    if (why) *why = features;
    return std::string(core);
  };
  if (f.avx512_bf16) return said("AVX-512 with BF16", "Cooperlake");
  if (f.avx512) return said("AVX-512", "SkylakeX");
  if (f.avx2 && f.fma) return said("AVX2 and FMA", f.amd ? "Zen" : "Haswell");
  if (why) *why = "no AVX2";
  return {};
#else
  if (why) *why = "not an x86 CPU";
  return {};
#endif
}

const Blas& blas() {
  static std::once_flag once;
  static Blas instance;
  std::call_once(once, [] { instance = load(); });
  return instance;
}

size_t blas_buffer_bytes() {
  return static_cast<size_t>(std::max(1, blas().threads)) * kBlasBuffer;
}

void check_blas_memory() {
  const size_t need = blas_buffer_bytes();
  void* p = mmap(nullptr, need + kMargin, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p != MAP_FAILED) {
    munmap(p, need + kMargin);
    return;
  }
  const int err = errno;
  const std::string limits = limits_text();
  fail("out of memory: OpenBLAS needs {} for its GEMM buffers ({} thread{} x 128 MiB, outside "
       "tfm's plan) and cannot have it{}: {}; {}{}",
       mib(static_cast<double>(need)), std::max(1, blas().threads), blas().threads > 1 ? "s" : "",
       limits.empty() ? "" : fmt::format(" under the process's limits ({})", limits), std::strerror(err),
       limits.empty() ? "use a smaller model" : "raise the limit, or use a smaller model",
       fewer_threads(blas().threads));
}

}  // namespace tfm::ops::cpu
