#include "libcore/base/phases.h"

#include <chrono>

#ifdef TFM_WITH_CUDA
#include <cuda_runtime.h>

#include "libcore/base/cuda_check.h"
#endif

#include "libcore/base/error.h"

namespace tfm::phases {

namespace detail {
bool enabled = false;
}

namespace {

struct Mark {
  const char* phase;
  void* event = nullptr;  // cudaEvent_t (CUDA)
  std::chrono::steady_clock::time_point at;
};

const Stream* g_stream = nullptr;
std::vector<Mark> g_marks;

void record(Mark& m, const Stream& stream) {
  if (stream.device().is_cpu()) {
    m.at = std::chrono::steady_clock::now();
    return;
  }
#ifdef TFM_WITH_CUDA
  activate(stream.device());
  cudaEvent_t e = nullptr;
  TFM_CUDA_CHECK(cudaEventCreate(&e));  // timing enabled
  TFM_CUDA_CHECK(cudaEventRecord(e, static_cast<cudaStream_t>(stream.native())));
  m.event = e;
#endif
}

void release() {
#ifdef TFM_WITH_CUDA
  for (Mark& m : g_marks)
    if (m.event) cudaEventDestroy(static_cast<cudaEvent_t>(m.event));
#endif
  g_marks.clear();
}

}  // namespace

void start(const Stream& stream) {
  release();
  g_stream = &stream;
  detail::enabled = true;
}

void mark(const Stream& stream, const char* phase) {
  if (!detail::enabled || &stream != g_stream) return;
  Mark m{phase, nullptr, {}};
  record(m, stream);
  g_marks.push_back(m);
}

std::vector<Total> stop() {
  TFM_REQUIRE(detail::enabled, "phases::stop without phases::start");
  detail::enabled = false;
  std::vector<Total> totals;
  if (!g_marks.empty()) {
    Mark end{nullptr, nullptr, {}};
    record(end, *g_stream);
    g_marks.push_back(end);
    g_stream->synchronize();
    for (size_t i = 0; i + 1 < g_marks.size(); ++i) {
      double seconds = 0;
      if (g_stream->device().is_cpu()) {
        seconds = std::chrono::duration<double>(g_marks[i + 1].at - g_marks[i].at).count();
      } else {
#ifdef TFM_WITH_CUDA
        float ms = 0;
        TFM_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(g_marks[i].event),
                                            static_cast<cudaEvent_t>(g_marks[i + 1].event)));
        seconds = ms * 1e-3;
#endif
      }
      const std::string phase = g_marks[i].phase;
      auto t = totals.begin();
      while (t != totals.end() && t->phase != phase) ++t;
      if (t == totals.end()) t = totals.insert(t, Total{phase});
      t->seconds += seconds;
      ++t->spans;
    }
  }
  release();
  g_stream = nullptr;
  return totals;
}

}  // namespace tfm::phases
