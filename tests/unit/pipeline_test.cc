// The ordered parallel pipeline under tfm-batch (libcore/data/pipeline.h):
// commits in the order of the takes whatever the work takes, and the first
// error stops it and reaches the caller.
#include <catch2/catch.hpp>

#include <chrono>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "libcore/data/pipeline.h"

using namespace tfm;

TEST_CASE("ordered pipeline: commits in the order taken, errors stop it", "[pipeline]") {
  for (const int threads : {1, 2, 5}) {
    struct Job {
      int k = -1;
    };
    int next = 0;
    std::vector<int> committed;
    std::mt19937 rng{uint32_t(threads)};
    std::vector<int> sleep_us(200);
    for (int& us : sleep_us) us = int(rng() % 300);
    run_ordered<Job>(
        threads, [&](Job& j) { return next < 200 ? (j.k = next++, true) : false; },
        [&](Job& j) { std::this_thread::sleep_for(std::chrono::microseconds(sleep_us[size_t(j.k)])); },
        [&](Job& j) { committed.push_back(j.k); });
    std::vector<int> want(200);
    for (int i = 0; i < 200; ++i) want[size_t(i)] = i;
    CHECK(committed == want);

    next = 0;
    committed.clear();
    CHECK_THROWS_WITH(run_ordered<Job>(
                          threads, [&](Job& j) { return next < 200 ? (j.k = next++, true) : false; },
                          [&](Job& j) {
                            if (j.k == 37) throw std::runtime_error("job 37 failed");
                          },
                          [&](Job& j) { committed.push_back(j.k); }),
                      "job 37 failed");
    CHECK(committed.size() <= 37);
    for (size_t i = 0; i < committed.size(); ++i) CHECK(committed[i] == int(i));
  }
}
