// How the ranks of a data-parallel run (data_parallel.h) agree: before the
// first update, on the run they set up; at every update, on whether to
// stop. Rank 0 speaks for the run: it prints, logs and writes the
// checkpoints; the other ranks say only errors.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "libcore/dist/comm.h"
#include "libcore/train/setup.h"
#include "libcore/train/trainer.h"

namespace tfm::train {

// Whether this process speaks for the run (rank 0, or the only process).
inline bool speaks(const dist::Comm& comm) { return comm.rank() == 0; }

// What the ranks must agree on, one "key = value" line each: the version,
// the device kind, the precision, the corpora, the vocabulary, the
// checkpoint resumed, the model and the options.
std::string agreement_text(const Run& run);

// Every rank runs `set_up` alone (it returns the rank's agreement_text),
// then all show each other what they set up, and go on only when they
// agree. A rank's setup error is told once, by rank 0, naming the rank;
// so is the first line where a rank differs from rank 0. Either way
// every rank throws (ReportedError on all but rank 0) and exits 1.
void agree_on_setup(dist::Comm& comm, const std::function<std::string()>& set_up);

// Several ranks stop together: at each update they agree (Comm::agree,
// the heartbeat that names a rank gone) on the weightiest reason any has.
// A signal or a rank's clock (--max-time) may come to one rank first; the
// other limits fall alike on all. `queued`: the updates queued in this
// run, the ranks' common count.
std::optional<StopReason> agreed_stop(dist::Comm& comm, int64_t queued,
                                      std::optional<StopReason> mine);

}  // namespace tfm::train
