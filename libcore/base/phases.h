// Phase timing: where a training step's time goes, for the benchmarks
// (tests/bench/train --phases). A mark says that the work queued on a
// stream from there to the next mark belongs to a phase; totals come back
// by phase. Off by default, when a mark is one test of a flag.
//
// On CUDA a mark records a timing event on the stream (the device's time,
// the host's queueing left out); on the CPU, where ops run in the caller's
// thread, it reads the host clock. One stream at a time: marks on another
// are ignored. Not for work inside a CUDA graph capture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "libcore/base/stream.h"

namespace tfm::phases {

// Timing on for `stream`, from an empty record.
void start(const Stream& stream);
// The work queued on `stream` from here on belongs to `phase` (a literal:
// the pointer is kept).
void mark(const Stream& stream, const char* phase);

namespace detail {
extern bool enabled;
}
inline bool on() { return detail::enabled; }

struct Total {
  std::string phase;
  double seconds = 0;  // summed over its spans
  int64_t spans = 0;
};
// Waits for the stream; the totals by phase in the order first marked;
// timing off. The span from the last mark to stop() counts to the last phase.
std::vector<Total> stop();

}  // namespace tfm::phases
