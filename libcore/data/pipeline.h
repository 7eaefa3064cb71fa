// An ordered parallel pipeline: take jobs in order, work on them on several
// threads at once, commit their results in the order they were taken. The
// shape of both ends of tfm-batch: read chunks of text / tokenize them /
// append them to the corpus; number blocks / compress them / write them.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tfm {

// Every core when `requested` is 0.
inline int thread_count(int requested) {
  if (requested > 0) return requested;
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

// Each of `threads` threads owns one Job (its buffers are reused) and loops:
//   take(job)   - under a lock, in order; false when there is nothing more
//   work(job)   - concurrently with the other threads
//   commit(job) - under a second lock, strictly in the order of the takes
// The first exception stops every thread after its current step and is
// rethrown here once all have joined; jobs taken later are not committed.
template <typename Job, typename Take, typename Work, typename Commit>
void run_ordered(int threads, Take take, Work work, Commit commit) {
  // Two locks: a thread taking (reading input, say) never holds up one
  // committing, and the other way round.
  std::mutex take_mutex, commit_mutex;
  std::condition_variable turn;
  uint64_t taken = 0, committed = 0;
  bool done = false;             // under take_mutex
  std::exception_ptr error;      // under commit_mutex
  std::atomic<bool> failed = false;
  auto loop = [&] {
    Job job;
    try {
      for (;;) {
        uint64_t mine;
        {
          std::lock_guard lock(take_mutex);
          if (done || failed || !take(job)) {
            done = true;
            return;
          }
          mine = taken++;
        }
        work(job);
        std::unique_lock lock(commit_mutex);
        turn.wait(lock, [&] { return committed == mine || error; });
        if (error) return;
        commit(job);
        ++committed;
        turn.notify_all();
      }
    } catch (...) {
      std::lock_guard lock(commit_mutex);
      if (!error) error = std::current_exception();
      failed = true;
      turn.notify_all();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(loop);
  loop();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace tfm
