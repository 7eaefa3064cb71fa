// A stream: the ordered queue of work on one device that ops run on.
// On the CPU work runs in the caller's thread and synchronize() is a no-op;
// on CUDA it owns a cudaStream_t (non-blocking) on its device. Every op
// takes the stream it runs on as its last argument.
#pragma once

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

 private:
  Device device_;
  void* native_ = nullptr;
};

}  // namespace tfm
