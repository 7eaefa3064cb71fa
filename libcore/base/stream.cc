#include "libcore/base/stream.h"

#ifdef TFM_WITH_CUDA
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "libcore/base/cuda_check.h"
#endif

#include "libcore/base/error.h"
#include "libcore/base/log.h"

namespace tfm {

#ifdef TFM_WITH_CUDA
namespace {
// The device's default memory pool serves the ops' stream-ordered scratch
// (cudaMallocAsync, kernels/cuda/common.cuh). By default it hands freed
// memory back to the driver at every synchronization, so each training step
// would allocate afresh; keeping it makes a step's scratch free after the
// first. Once per device.
void keep_pool_memory(int device) {
  static std::mutex mutex;
  static std::vector<bool> done;
  std::lock_guard<std::mutex> lock(mutex);
  if (done.size() <= static_cast<size_t>(device)) done.resize(static_cast<size_t>(device) + 1);
  if (done[static_cast<size_t>(device)]) return;
  cudaMemPool_t pool = nullptr;
  TFM_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  uint64_t keep = UINT64_MAX;
  TFM_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  done[static_cast<size_t>(device)] = true;
}
}  // namespace
#endif

Stream::Stream(Device device) : device_(device) {
  if (device.is_cpu()) return;
#ifdef TFM_WITH_CUDA
  activate(device);
  keep_pool_memory(device.index);
  cudaStream_t s = nullptr;
  TFM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  native_ = s;
#else
  fail_without_cuda();
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

const Stream& host_stream() {
  static const Stream cpu(Device::cpu());
  return cpu;
}

Event::Event(Device device) : device_(device) {
  if (device.is_cpu()) return;
#ifdef TFM_WITH_CUDA
  activate(device);
  cudaEvent_t e = nullptr;
  TFM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  native_ = e;
#else
  fail_without_cuda();
#endif
}

Event::~Event() {
#ifdef TFM_WITH_CUDA
  if (native_) {
    cudaSetDevice(device_.index);
    cudaEventDestroy(static_cast<cudaEvent_t>(native_));
  }
#endif
}

void Event::record(const Stream& stream) {
  TFM_REQUIRE(stream.device() == device_, "an event of {} recorded on a stream of {}", device_.str(),
              stream.device().str());
#ifdef TFM_WITH_CUDA
  if (native_)
    TFM_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(native_),
                                   static_cast<cudaStream_t>(stream.native())));
#endif
}

bool Event::done() const {
#ifdef TFM_WITH_CUDA
  if (!native_) return true;
  const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(native_));
  if (e == cudaErrorNotReady) return false;
  TFM_CUDA_CHECK(e);
#endif
  return true;
}

void Event::synchronize() const {
#ifdef TFM_WITH_CUDA
  if (native_) TFM_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(native_)));
#endif
}

void Event::wait(const Stream& stream) const {
#ifdef TFM_WITH_CUDA
  if (native_)
    TFM_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream.native()),
                                       static_cast<cudaEvent_t>(native_), 0));
#else
  (void)stream;
#endif
}

StreamGraph::StreamGraph(const Stream& stream, bool enabled)
    : stream_(stream), enabled_(enabled && stream.device().is_cuda()) {}

StreamGraph::~StreamGraph() {
#ifdef TFM_WITH_CUDA
  for (const auto& [key, exec] : execs_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
#endif
}

void* StreamGraph::find(int64_t key) const {
  for (const auto& [k, exec] : execs_)
    if (k == key) return exec;
  return nullptr;
}

void StreamGraph::keep(int64_t key, void* exec) { execs_.emplace_back(key, exec); }

void StreamGraph::launch(void* exec) {
#ifdef TFM_WITH_CUDA
  TFM_CUDA_CHECK(
      cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), static_cast<cudaStream_t>(stream_.native())));
  ++launches_;
#else
  (void)exec;
#endif
}

bool StreamGraph::begin() {
  if (!enabled_) return false;
#ifdef TFM_WITH_CUDA
  activate(stream_.device());
  // Relaxed: the ops may call what is no stream work (cuBLASLt's heuristic
  // when a GEMM shape is new, cudaFuncSetAttribute) while they queue.
  const cudaError_t e = cudaStreamBeginCapture(static_cast<cudaStream_t>(stream_.native()),
                                               cudaStreamCaptureModeRelaxed);
  if (e == cudaSuccess) return true;
  cudaGetLastError();
  log::debug("CUDA graphs off: the stream cannot be captured ({})", cudaGetErrorString(e));
  enabled_ = false;
#endif
  return false;
}

void StreamGraph::abandon() {
#ifdef TFM_WITH_CUDA
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(static_cast<cudaStream_t>(stream_.native()), &graph);
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();
  log::debug("CUDA graphs off: a call was refused while the stream was captured");
#endif
  enabled_ = false;
}

void* StreamGraph::end_and_build() {
#ifdef TFM_WITH_CUDA
  cudaGraph_t graph = nullptr;
  const cudaError_t e = cudaStreamEndCapture(static_cast<cudaStream_t>(stream_.native()), &graph);
  if (e != cudaSuccess || !graph) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    log::debug("CUDA graphs off: the work could not be captured ({})", cudaGetErrorString(e));
    enabled_ = false;
    return nullptr;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (made != cudaSuccess) {
    cudaGetLastError();
    log::debug("CUDA graphs off: the graph could not be built ({})", cudaGetErrorString(made));
    enabled_ = false;
    return nullptr;
  }
  ++built_;
  return exec;
#else
  return nullptr;
#endif
}

}  // namespace tfm
