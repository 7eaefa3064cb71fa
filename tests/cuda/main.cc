// The cuda test executable: CUDA ops against the CPU ops on fresh random
// inputs. Exits 77 (ctest: skipped) when no GPU is usable here.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "libcore/device.h"

int main(int argc, char** argv) {
  const tfm::CudaStatus& cuda = tfm::cuda_status();
  if (cuda.devices.empty()) {
    std::printf("skipped: no usable CUDA device (%s)\n", cuda.why_none.c_str());
    return 77;
  }
  std::printf("running on cuda:0: %s, compute capability %d.%d\n", cuda.devices[0].name.c_str(),
              cuda.devices[0].major, cuda.devices[0].minor);
  return Catch::Session().run(argc, argv);
}
