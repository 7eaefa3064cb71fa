// A stream: the ordered queue of work on one device that ops run on.
// On the CPU work runs in the caller's thread and synchronize() is a no-op;
// on CUDA it owns a cudaStream_t (non-blocking) on its device. Every op
// takes the stream it runs on as its last argument.
#pragma once

#include <memory>

#include "libcore/device.h"

namespace tfm {

class Stream {
 public:
  explicit Stream(Device device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  Device device() const { return device_; }
  // The cudaStream_t, or nullptr on the CPU.
  void* native() const { return native_; }
  // Waits for all queued work; CUDA errors raised by that work surface here.
  void synchronize() const;

  // A slot for the op layer's per-stream state (cuBLASLt handle and
  // workspace on CUDA), created on first use and destroyed with the stream.
  std::shared_ptr<void>& kernel_state() const { return kernel_state_; }

 private:
  Device device_;
  void* native_ = nullptr;
  mutable std::shared_ptr<void> kernel_state_;  // released before the stream
};

}  // namespace tfm
