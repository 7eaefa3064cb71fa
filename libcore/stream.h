// A stream: the ordered queue of work on one device that ops run on.
// On the CPU work runs in the caller's thread and synchronize() is a no-op;
// on CUDA it owns a cudaStream_t (non-blocking) on its device. Every op, and
// every copy and fill of device memory (device.h, tensor.h), takes the
// stream it runs on: nothing in tfm runs on CUDA's legacy default stream,
// whose work would be unordered against these non-blocking streams.
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

// The CPU stream for host-side work that needs one (copies between two CPU
// tensors, CPU ops outside a model). One per process; work on it runs in
// the calling thread.
const Stream& host_stream();

// A point in a stream's queue (cudaEvent_t, timing disabled): the host or
// another stream can wait for the work queued before it. No-op on the CPU.
class Event {
 public:
  explicit Event(Device device);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& stream);
  void synchronize() const;  // the host waits
  void wait(const Stream& stream) const;  // `stream` waits, the host does not

 private:
  Device device_;
  void* native_ = nullptr;
};

}  // namespace tfm
