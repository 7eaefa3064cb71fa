// The cuda test executable: CUDA ops against the CPU ops on fresh random
// inputs. Exits 77 (ctest: skipped) when no GPU is usable here.
//
// Small sizes, for compute-sanitizer (scripts/gpu-check), which runs the
// kernels 10 to 100 times slower: `--small` (taken out of the arguments
// before Catch sees them) or TFM_CUDA_TEST_SMALL=1. Either sets
// TFM_CUDA_TEST_SMALL=1 in the environment, which a test reads with
// cuda_test_small() below (declared where a test needs it) to shrink its
// shapes, and, when no test spec is given, runs every test but those tagged
// [large] (shapes that are the point of the test, e.g. K = 25,000).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "libcore/base/device.h"
#include "tests/support.h"

namespace tfm::test {

// True under --small or TFM_CUDA_TEST_SMALL=1 (anything but empty or 0).
bool cuda_test_small() {
  const char* v = std::getenv("TFM_CUDA_TEST_SMALL");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

}  // namespace tfm::test

int main(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::strcmp(argv[i], "--small") == 0) {
      setenv("TFM_CUDA_TEST_SMALL", "1", 1);
      continue;
    }
    args.push_back(argv[i]);
  }
  const bool small = tfm::test::cuda_test_small();
  const tfm::CudaStatus& cuda = tfm::cuda_status();
  if (cuda.devices.empty()) {
    std::printf("skipped: no usable CUDA device (%s)\n", cuda.why_none.c_str());
    return 77;
  }
  std::printf("running on cuda:0: %s, compute capability %d.%d%s\n", cuda.devices[0].name.c_str(),
              cuda.devices[0].major, cuda.devices[0].minor,
              small ? "; small sizes, tests tagged [large] left out" : "");
  return tfm::test::run_catch(static_cast<int>(args.size()), args.data(), small ? "~[large]" : nullptr);
}
