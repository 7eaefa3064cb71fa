#include "libcore/stream.h"

#ifdef TFM_WITH_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/check.h"
#endif

#include "libcore/error.h"

namespace tfm {

Stream::Stream(Device device) : device_(device) {
  if (device.is_cpu()) return;
#ifdef TFM_WITH_CUDA
  activate(device);
  cudaStream_t s = nullptr;
  TFM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  native_ = s;
#else
  fail("unsupported device: cuda (built without CUDA)");
#endif
}

Stream::~Stream() {
  kernel_state_.reset();  // may use the stream's device
#ifdef TFM_WITH_CUDA
  if (native_) {
    cudaSetDevice(device_.index);
    cudaStreamDestroy(static_cast<cudaStream_t>(native_));
  }
#endif
}

void Stream::synchronize() const {
#ifdef TFM_WITH_CUDA
  if (native_) TFM_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(native_)));
#endif
}

}  // namespace tfm
