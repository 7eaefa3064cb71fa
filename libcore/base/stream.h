// A stream: the ordered queue of work on one device that ops run on.
// On the CPU work runs in the caller's thread and synchronize() is a no-op;
// on CUDA it owns a cudaStream_t (non-blocking) on its device. Every op, and
// every copy and fill of device memory (device.h, tensor.h), takes the
// stream it runs on: nothing in tfm runs on CUDA's legacy default stream,
// whose work would be unordered against these non-blocking streams.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "libcore/base/device.h"

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
  bool done() const;         // whether the work before it has run (no wait)
  void wait(const Stream& stream) const;  // `stream` waits, the host does not

 private:
  Device device_;
  void* native_ = nullptr;
};

// Work queued on a stream, run as CUDA graphs kept by key: the first run()
// of a key captures what `queue` puts on the stream (nothing runs while it
// does), builds an executable graph and launches it; every later run() of
// that key launches the same graph again, without calling `queue`. The
// caller picks keys so that a key's work is always the same kernels on the
// same buffers with the same sizes; what changes from run to run (a
// decoding step's position, its rows) the kernels read from memory that
// the caller writes before run(). The host pays once per key what queuing
// the work costs, then one call a run; the GPU runs the kernels back to
// back, without a launch's gap between two. On the CPU, when disabled, or
// where the work cannot be captured (that is then said once, at debug
// level), `queue` runs as it is, every time. `queue` must only queue work
// on the stream.
class StreamGraph {
 public:
  StreamGraph(const Stream& stream, bool enabled);
  ~StreamGraph();
  StreamGraph(const StreamGraph&) = delete;
  StreamGraph& operator=(const StreamGraph&) = delete;

  template <typename F>
  void run(int64_t key, F&& queue) {
    void* exec = find(key);
    if (!exec) {
      exec = capture(queue);
      if (!exec) return queue();  // graphs off: the work as it is
      keep(key, exec);
    }
    const auto start = std::chrono::steady_clock::now();
    launch(exec);
    launch_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  bool enabled() const { return enabled_; }
  int64_t launches() const { return launches_; }      // graphs launched
  int64_t instantiations() const { return built_; }  // graphs built (one a key)
  // The host's seconds, summed: capturing the work (what queuing it
  // costs), and ending the capture, building the executable graph and
  // launching it. Where a GPU waits for the host, these say which.
  double capture_seconds() const { return capture_seconds_; }
  double launch_seconds() const { return launch_seconds_; }

 private:
  // The executable graph of `queue`, built; null (nothing ran, and for a
  // refusal graphs are off) when it cannot be captured.
  template <typename F>
  void* capture(F& queue) {
    if (!begin()) return nullptr;
    const auto start = std::chrono::steady_clock::now();
    try {
      queue();
    } catch (...) {
      // A call the capture refused: graphs off; the caller runs the work as
      // it is (an error of the work itself then surfaces again).
      abandon();
      return nullptr;
    }
    const auto captured = std::chrono::steady_clock::now();
    capture_seconds_ += std::chrono::duration<double>(captured - start).count();
    void* exec = end_and_build();
    launch_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - captured).count();
    return exec;
  }
  bool begin();
  void abandon();
  void* end_and_build();
  void* find(int64_t key) const;
  void keep(int64_t key, void* exec);
  void launch(void* exec);

  const Stream& stream_;
  bool enabled_;
  std::vector<std::pair<int64_t, void*>> execs_;  // (key, cudaGraphExec_t), few
  int64_t launches_ = 0, built_ = 0;
  double capture_seconds_ = 0, launch_seconds_ = 0;
};

}  // namespace tfm
