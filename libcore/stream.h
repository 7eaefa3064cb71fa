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
  bool done() const;         // whether the work before it has run (no wait)
  void wait(const Stream& stream) const;  // `stream` waits, the host does not

 private:
  Device device_;
  void* native_ = nullptr;
};

// The work that one call queues on a stream, run as one CUDA graph: run()
// captures what `queue` puts on the stream (nothing runs while it does),
// then launches it with one call. When the capture has the shape of the
// last one (the same kernels and copies, other arguments: a decoding step
// of the same rows), the executable graph is updated in place
// (cudaGraphExecUpdate) rather than built again. The host pays about what
// it paid to launch the work; the GPU runs the kernels back to back, without
// a launch's gap between two. On the CPU, when disabled, or where the work
// cannot be captured (that is then said once, at debug level), `queue` runs
// as it is. `queue` must only queue work on the stream: it may run twice.
//
// prepare() and launch_prepared() are run() in two halves, so that the host
// captures the next piece of work while the device still runs the last:
// prepare() captures `queue` into a second executable graph (built or
// updated as run() does) and runs nothing; launch_prepared() launches it
// (the two graphs then trade places). A prepared graph holds the pointers
// and sizes of its capture: the caller launches it only for the work it
// captured, and the graph it updates must not still run (the caller has
// waited for the device since it was launched).
class StreamGraph {
 public:
  StreamGraph(const Stream& stream, bool enabled);
  ~StreamGraph();
  StreamGraph(const StreamGraph&) = delete;
  StreamGraph& operator=(const StreamGraph&) = delete;

  template <typename F>
  void run(F&& queue) {
    prepared_ = false;  // a prepared graph not launched is left for the next prepare()
    if (!capture(queue, exec_)) return queue();
    const auto start = std::chrono::steady_clock::now();
    launch(exec_);
    launch_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  // Whether a graph is prepared: false when graphs are off or the capture
  // failed (nothing ran; run() then runs the work as it is).
  template <typename F>
  bool prepare(F&& queue) {
    prepared_ = capture(queue, pending_);
    return prepared_;
  }
  bool prepared() const { return prepared_; }
  void launch_prepared();

  bool enabled() const { return enabled_; }
  int64_t launches() const { return launches_; }      // graphs launched
  int64_t instantiations() const { return built_; }  // of them, graphs built anew
  int64_t prepared_launches() const { return prepared_launches_; }  // of them, prepared ones
  // The host's seconds, summed: capturing the work (what queuing it
  // costs), and ending the capture, updating or building the executable
  // graph and launching it. Where a GPU waits for the host, these say which.
  double capture_seconds() const { return capture_seconds_; }
  double launch_seconds() const { return launch_seconds_; }

 private:
  // Captures `queue` into the executable graph `slot`; false (nothing ran,
  // and for a refusal graphs are off) when it cannot.
  template <typename F>
  bool capture(F& queue, void*& slot) {
    if (!begin()) return false;
    const auto start = std::chrono::steady_clock::now();
    try {
      queue();
    } catch (...) {
      // A call the capture refused: graphs off; the caller runs the work as
      // it is (an error of the work itself then surfaces again).
      abandon();
      return false;
    }
    const auto captured = std::chrono::steady_clock::now();
    capture_seconds_ += std::chrono::duration<double>(captured - start).count();
    const bool installed = end_and_install(slot);
    launch_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - captured).count();
    return installed;
  }
  bool begin();
  void abandon();
  bool end_and_install(void*& slot);
  void launch(void* exec);

  const Stream& stream_;
  bool enabled_;
  void* exec_ = nullptr;     // cudaGraphExec_t: run()'s, the last launched
  void* pending_ = nullptr;  // prepare()'s
  bool prepared_ = false;
  int64_t launches_ = 0, built_ = 0, prepared_launches_ = 0;
  double capture_seconds_ = 0, launch_seconds_ = 0;
};

}  // namespace tfm
