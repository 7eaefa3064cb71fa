// Weighted training corpora (tfm-train --weights; libcore/train/data.h,
// mixed_epoch_order): what each epoch draws from each corpus, the order
// they are mixed in, and how the weights and the corpora travel through
// the options and the training state (options.h, state.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "libcore/base/error.h"
#include "libcore/train/data.h"
#include "libcore/train/options.h"
#include "libcore/train/state.h"

using namespace tfm;
using namespace tfm::train;
using Catch::Contains;

namespace {

// How many times epoch `order` draws each batch of corpus c.
std::map<uint32_t, int> draws_of(const std::vector<BatchRef>& order, uint32_t c) {
  std::map<uint32_t, int> n;
  for (const BatchRef b : order)
    if (b.corpus == c) ++n[b.batch];
  return n;
}

// The batches of corpus c that epoch `order` draws, each once.
std::set<uint32_t> subset_of(const std::vector<BatchRef>& order, uint32_t c) {
  std::set<uint32_t> s;
  for (const BatchRef b : order)
    if (b.corpus == c) s.insert(b.batch);
  return s;
}

}  // namespace

TEST_CASE("one corpus of weight 1 is ordered as epoch_order orders it", "[train]") {
  for (size_t n : {size_t{1}, size_t{6}, size_t{27}, size_t{1000}})
    for (int64_t epoch : {1, 2, 9}) {
      const std::vector<uint32_t> plain = epoch_order(n, 7, epoch);
      const std::vector<BatchRef> mixed = mixed_epoch_order({n}, {1.0}, 7, epoch);
      REQUIRE(mixed.size() == n);
      for (size_t i = 0; i < n; ++i) {
        REQUIRE(mixed[i].corpus == 0);
        REQUIRE(mixed[i].batch == plain[i]);
      }
    }
  CHECK(epoch_batches({27}, {1.0}) == 27);
}

TEST_CASE("weights 2 and 0.5 draw every batch twice and half of the batches once", "[train]") {
  const std::vector<size_t> sizes = {40, 31};
  const std::vector<double> weights = {2.0, 0.5};
  // round(0.5 * 31) = 16 (halves round away from zero).
  CHECK(batches_drawn(40, 2.0) == 80);
  CHECK(batches_drawn(31, 0.5) == 16);
  CHECK(batches_drawn(10, 1.25) == 13);  // 10 + round(2.5)
  CHECK(batches_drawn(10, 0.01) == 0);
  CHECK(epoch_batches(sizes, weights) == 96);
  for (int64_t epoch : {1, 2, 3}) {
    const std::vector<BatchRef> order = mixed_epoch_order(sizes, weights, 5, epoch);
    REQUIRE(order.size() == 96);
    const auto first = draws_of(order, 0);
    REQUIRE(first.size() == 40);
    for (const auto& [batch, n] : first) CHECK(n == 2);
    const auto second = draws_of(order, 1);
    CHECK(second.size() == 16);
    for (const auto& [batch, n] : second) {
      CHECK(batch < 31);
      CHECK(n == 1);  // a subset: drawn without replacement
    }
  }
  // 1.5: every batch once, and a half of them a second time.
  const std::vector<BatchRef> order = mixed_epoch_order({20}, {1.5}, 5, 1);
  const auto n = draws_of(order, 0);
  CHECK(n.size() == 20);
  int twice = 0;
  for (const auto& [batch, k] : n) twice += k == 2;
  CHECK(twice == 10);
  // The corpora are mixed, not laid end to end.
  const std::vector<BatchRef> mixed = mixed_epoch_order(sizes, weights, 5, 1);
  CHECK(std::count_if(mixed.begin(), mixed.begin() + 48, [](BatchRef b) { return b.corpus == 1; }) > 0);
  CHECK(std::count_if(mixed.begin() + 48, mixed.end(), [](BatchRef b) { return b.corpus == 1; }) > 0);
}

TEST_CASE("the mixed order is a pure function of the seed and the epoch", "[train]") {
  const std::vector<size_t> sizes = {50, 200, 9};
  const std::vector<double> weights = {1.0, 0.3, 2.5};
  const std::vector<BatchRef> a = mixed_epoch_order(sizes, weights, 11, 4);
  CHECK(mixed_epoch_order(sizes, weights, 11, 4) == a);
  CHECK(mixed_epoch_order(sizes, weights, 11, 5) != a);
  CHECK(mixed_epoch_order(sizes, weights, 12, 4) != a);
  // Another epoch, another fractional subset (of the same size); the same
  // epoch of another corpus index draws another one too.
  const std::set<uint32_t> s4 = subset_of(a, 1), s5 = subset_of(mixed_epoch_order(sizes, weights, 11, 5), 1);
  CHECK(s4.size() == 60);
  CHECK(s5.size() == 60);
  CHECK(s4 != s5);
  const std::vector<BatchRef> swapped = mixed_epoch_order({50, 9, 200}, {1.0, 2.5, 0.3}, 11, 4);
  CHECK(subset_of(swapped, 2) != s4);
  // Pinned: a change here changes the batches every weighted run draws
  // (and breaks resuming its checkpoints).
  CHECK(drawn_batches(10, 0.3, 0, 1, 1) == std::vector<uint32_t>{1, 6, 8});
}

TEST_CASE("weights that draw too much are refused", "[train]") {
  REQUIRE_THROWS_WITH(batches_drawn(1000, 1e7), Contains("too many to shuffle"));
  REQUIRE_THROWS_WITH(epoch_batches({10, 10}, {1.0}), Contains("1 weights for 2 training corpora"));
}

TEST_CASE("weights in the options are parsed, checked and written back", "[train]") {
  CHECK(parse_weights("1 0.5") == std::vector<double>{1.0, 0.5});
  CHECK(parse_weights(" 3\t0.25 ") == std::vector<double>{3.0, 0.25});
  REQUIRE_THROWS_WITH(parse_weights("1 0"), Contains("weights must be above 0, got 0"));
  REQUIRE_THROWS_WITH(parse_weights("1 -2"), Contains("weights must be above 0"));
  REQUIRE_THROWS_WITH(parse_weights("1 inf"), Contains("weights must be a number, got 'inf'"));
  REQUIRE_THROWS_WITH(parse_weights("nan"), Contains("weights must be a number"));
  REQUIRE_THROWS_WITH(parse_weights(""), Contains("got none"));
  TrainOptions o;
  CHECK(o.to_text().find("weights") == std::string::npos);  // none set: no line
  o.set("weights", "1 0.1");
  CHECK(o.get("weights") == "1 0.1");
  CHECK(o.to_text().find("\nweights = 1 0.1\n") != std::string::npos);
  TrainOptions back;
  back.set("weights", o.get("weights"));
  CHECK(back == o);
}

TEST_CASE("the training state names every corpus and reads an old one as one of weight 1", "[train]") {
  TrainState s;
  s.corpus = {"spm-0123456789abcdef", 100, 700, 650, "00ff00ff00ff00ff"};
  s.more_corpora = {{"spm-0123456789abcdef", 40, 300, 280, "0123456789abcdef"},
                    {"spm-0123456789abcdef", 7, 30, 28, "fedcba9876543210"}};
  s.batches = 30;
  s.options.set("weights", "1 0.5 3");
  const std::string text = s.to_text();
  CHECK(text.find("corpora = 3\n") != std::string::npos);
  CHECK(text.find("corpus3_digest = fedcba9876543210\n") != std::string::npos);
  const TrainState back = TrainState::parse(text, "state");
  CHECK(back == s);
  CHECK(back.corpora().size() == 3);
  CHECK(back.weights() == std::vector<double>{1.0, 0.5, 3.0});

  // A state written before --weights: one corpus, no weights, no new keys.
  TrainState old;
  old.corpus = s.corpus;
  old.batches = 12;
  const std::string old_text = old.to_text();
  CHECK(old_text.find("corpora") == std::string::npos);
  CHECK(old_text.find("weights") == std::string::npos);
  const TrainState old_back = TrainState::parse(old_text, "state");
  CHECK(old_back.corpora() == std::vector<CorpusIdentity>{s.corpus});
  CHECK(old_back.weights() == std::vector<double>{1.0});

  std::string fewer = text;
  fewer.replace(fewer.find("corpora = 3"), 11, "corpora = 2");
  REQUIRE_THROWS_WITH(TrainState::parse(fewer, "x"), Contains("has 2 corpora, and keys of 3"));
  TrainState two_weights = s;
  two_weights.options.set("weights", "1 2");
  REQUIRE_THROWS_WITH(TrainState::parse(two_weights.to_text(), "x"), Contains("3 corpora and 2 weights"));
}
