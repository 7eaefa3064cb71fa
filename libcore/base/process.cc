#include "libcore/base/process.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "libcore/base/device.h"

#ifndef TFM_VERSION
#define TFM_VERSION "0.0.0"
#endif

namespace tfm {

std::string version_string() {
  const CudaStatus& cuda = cuda_status();
  if (!cuda.compiled) return fmt::format("tfm {} (CPU only)", TFM_VERSION);
  return fmt::format("tfm {} (CUDA {}.{} for {})", TFM_VERSION, cuda.runtime_version / 1000,
                     cuda.runtime_version % 1000 / 10, cuda.architectures);
}

namespace {

// How many other tasks are runnable now: the kernel's count in /proc/loadavg
// ("1.42 1.64 1.54 2/78 22680": running/total, this process included), the
// median of nine samples a millisecond apart, so that a passing daemon does
// not count and a build does. -1 when it cannot be read.
int others_running() {
  std::array<int, 9> counts{};
  for (int& count : counts) {
    std::FILE* f = std::fopen("/proc/loadavg", "r");
    if (!f) return -1;
    int running = 0;  // the fourth field's first number; the load averages skipped
    const int got = std::fscanf(f, "%*f %*f %*f %d/", &running);
    std::fclose(f);
    if (got != 1) return -1;
    count = std::max(running - 1, 0);
    usleep(1000);
  }
  std::nth_element(counts.begin(), counts.begin() + counts.size() / 2, counts.end());
  return counts[counts.size() / 2];
}

}  // namespace

void prefer_sleeping_threads(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  // Cores to spare for every thread: libgomp's default policy (a thread
  // spins a moment after a region, then sleeps) suits a decoding step of a
  // hundred short regions best.
  const int others = others_running();
  if (others >= 0 && others + cpu_threads() <= available_cpus()) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("OMP_WAIT_POLICY");  // still here: run as we are
}

}  // namespace tfm
