// Target prefixes and hard lexical constraints (libcore/decode/constraints.h):
// the constraint tracker and its plan against hand-worked cases; a prefix
// forced and scored as a forced decode scores it; every finished
// hypothesis containing every constraint, at beam 1 and wider, with
// prefixes; sentences without either unchanged beside ones with them;
// outputs that do not depend on the batch; bad requests refused.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <memory>
#include <set>

#include "libcore/base/error.h"
#include "libcore/decode/search.h"
#include "tests/support.h"
#include "tests/unit/search_fixtures.h"

using namespace tfm;
using test::inference_model;
using test::limits_for;
using test::search;

namespace {

uint64_t next_random(uint64_t& seed) {
  seed = seed * 6364136223846793005ull + 1442695040888963407ull;
  return seed >> 33;
}

std::vector<int32_t> random_tokens(size_t n, int64_t vocab, uint64_t& seed) {
  std::vector<int32_t> out;
  for (size_t j = 0; j < n; ++j) out.push_back(static_cast<int32_t>(4 + next_random(seed) % static_cast<uint64_t>(vocab - 4)));
  return out;
}

// Sentences with constraints of one to three tokens, one of them a prefix
// of another in every third sentence, and a prefix in every other one.
std::vector<SearchRequest> constrained_requests(int count, int64_t vocab, uint64_t seed) {
  std::vector<SearchRequest> out;
  for (int i = 0; i < count; ++i) {
    SearchRequest r;
    r.source = random_tokens(1 + static_cast<size_t>(i % 5), vocab, seed);
    for (int c = 0; c < 1 + i % 3; ++c) r.constraints.push_back(random_tokens(1 + static_cast<size_t>((i + c) % 3), vocab, seed));
    if (i % 3 == 0) {  // "a b" and "a b c"
      std::vector<int32_t> longer = r.constraints[0];
      longer.push_back(static_cast<int32_t>(4 + next_random(seed) % static_cast<uint64_t>(vocab - 4)));
      r.constraints.push_back(longer);
    }
    if (i % 2 == 1) r.prefix = random_tokens(1 + static_cast<size_t>(i % 4), vocab, seed);
    r.max_len = static_cast<int64_t>(r.source.size()) + 4 + i % 4;
    r.max_len = std::max(r.max_len, forced_length(r));
    out.push_back(r);
  }
  return out;
}

bool contains(const std::vector<int32_t>& tokens, const std::vector<int32_t>& phrase) {
  return std::search(tokens.begin(), tokens.end(), phrase.begin(), phrase.end()) != tokens.end();
}

bool same(const Hypothesis& a, const Hypothesis& b) {
  return a.tokens == b.tokens && a.log_prob == b.log_prob && a.score == b.score &&
         a.token_log_probs == b.token_log_probs;
}

void check_same(const std::vector<Hypothesis>& got, const std::vector<Hypothesis>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) CHECK(same(got[k], want[k]));
}

}  // namespace

TEST_CASE("the constraint tracker follows phrases, and its plan meets them all", "[constraints]") {
  const Phrases c = {{5, 6}, {5, 6, 7}, {9}};  // "a b", "a b c" (the first a prefix of it), "x"
  ConstraintState s;
  CHECK(constraint_tokens_left(c, s) == 4);  // a b c x
  s = advance_constraints(c, s, 5);
  CHECK(s.active == 0b011);
  CHECK(s.matched == 1);
  s = advance_constraints(c, s, 6);  // "a b" met, "a b c" goes on
  CHECK(s.met == 0b001);
  CHECK(s.active == 0b010);
  CHECK(s.matched == 2);
  CHECK(constraint_tokens_left(c, s) == 2);
  ConstraintState off = advance_constraints(c, s, 8);  // abandoned: "a b c" unmet again
  CHECK(off.met == 0b001);
  CHECK(off.active == 0);
  CHECK(constraint_tokens_left(c, off) == 4);  // a b c, x
  ConstraintState restart = advance_constraints(c, s, 5);  // abandons, and starts "a b c" again (not the met "a b")
  CHECK(restart.active == 0b010);
  CHECK(restart.matched == 1);
  s = advance_constraints(c, s, 7);
  CHECK(s.met == 0b011);
  CHECK(s.matched == 0);
  s = advance_constraints(c, s, 9);
  CHECK(s.met == 0b111);
  CHECK(constraint_tokens_left(c, s) == 0);
  CHECK(advance_constraints(c, s, 5).met == 0b111);  // met stays met
  // A request's forced length: its prefix, then what the constraints still need.
  SearchRequest r;
  r.prefix = {5, 6};
  r.constraints = c;
  CHECK(forced_length(r) == 2 + 2);  // "a b" met by the prefix; "c" continues "a b c", then x
  r.prefix = {};
  CHECK(forced_length(r) == 4);
}

TEST_CASE("a prefix is forced and scored as a forced decode scores it", "[constraints]") {
  const auto model = inference_model(17, 4);
  const int32_t start = static_cast<int32_t>(model->config().decoder_start_id);
  SearchRequest r;
  r.source = {5, 9, 7, 12};
  r.prefix = {8, 8, 13};
  r.max_len = 9;
  // The forced decode: the prefix fed one token at a time, each scored by
  // the model's log-probabilities.
  const BeamSearchOptions greedy_options{.beam_size = 1};
  IncrementalDecoder forced(*model, limits_for({r}, greedy_options, 17));
  forced.start({r.source}, 1, search_steps({r}));
  std::vector<float> want;
  for (size_t t = 0; t < r.prefix.size(); ++t) {
    forced.step({{0, 0, t == 0 ? start : r.prefix[t - 1]}});
    want.push_back(static_cast<float>(test::to_f64(forced.log_probs())[static_cast<size_t>(r.prefix[t])]));
  }
  for (const int64_t W : {int64_t{1}, int64_t{3}}) {
    const BeamSearchOptions o{.beam_size = W, .n_best = W};
    const auto got = search(*model, {r}, o);
    INFO("beam " << W);
    REQUIRE(static_cast<int64_t>(got[0].size()) == W);
    std::set<std::vector<int32_t>> distinct;
    for (const Hypothesis& h : got[0]) {
      REQUIRE(h.tokens.size() >= r.prefix.size());
      CHECK(std::equal(r.prefix.begin(), r.prefix.end(), h.tokens.begin()));
      CHECK(std::equal(want.begin(), want.end(), h.token_log_probs.begin()));  // bit for bit
      CHECK(static_cast<int64_t>(h.tokens.size()) <= r.max_len);
      double sum = 0;
      for (float lp : h.token_log_probs) sum += lp;
      CHECK(sum == Approx(h.log_prob).margin(1e-9));
      distinct.insert(h.tokens);
    }
    CHECK(distinct.size() == got[0].size());  // the beam spreads after the prefix
  }
  // Greedy after the prefix: the most likely token from there on.
  const auto greedy = search(*model, {r}, greedy_options);
  IncrementalDecoder dec(*model, limits_for({r}, greedy_options, 17));
  dec.start({r.source}, 1, search_steps({r}));
  std::vector<int32_t> tokens;
  for (int64_t t = 0;; ++t) {
    dec.step({{0, 0, tokens.empty() ? start : tokens.back()}});
    const std::vector<double> lp = test::to_f64(dec.log_probs());
    int32_t y = static_cast<int32_t>(std::max_element(lp.begin(), lp.end()) - lp.begin());
    if (t < static_cast<int64_t>(r.prefix.size())) y = r.prefix[static_cast<size_t>(t)];
    if (t == r.max_len) y = kEosId;
    if (y == kEosId) break;
    tokens.push_back(y);
  }
  CHECK(greedy[0][0].tokens == tokens);
  // Samples continue after the prefix.
  BeamSearchOptions s;
  s.sampling.on = true;
  s.beam_size = s.n_best = 4;
  r.key = 3;
  const auto samples = search(*model, {r}, s);
  REQUIRE(samples[0].size() == 4);
  for (const Hypothesis& h : samples[0]) {
    REQUIRE(h.tokens.size() >= r.prefix.size());
    CHECK(std::equal(r.prefix.begin(), r.prefix.end(), h.tokens.begin()));
    CHECK(std::equal(want.begin(), want.end(), h.token_log_probs.begin()));
  }
}

TEST_CASE("every hypothesis contains every constraint, at any beam, with prefixes", "[constraints]") {
  const int64_t V = 23;
  const auto model = inference_model(V, 9);
  const std::vector<SearchRequest> batch = constrained_requests(12, V, 31);
  struct Case { int64_t beam, n_best; EarlyStopping stop; };
  for (const Case& c : {Case{1, 1, EarlyStopping::bound}, Case{2, 2, EarlyStopping::bound},
                        Case{4, 3, EarlyStopping::bound}, Case{5, 5, EarlyStopping::beam},
                        Case{3, 2, EarlyStopping::never}}) {
    BeamSearchOptions o{.beam_size = c.beam, .early_stopping = c.stop, .n_best = c.n_best};
    const auto got = search(*model, batch, o);
    for (size_t s = 0; s < batch.size(); ++s) {
      INFO("beam " << c.beam << ", sentence " << s);
      REQUIRE(!got[s].empty());
      CHECK(static_cast<int64_t>(got[s].size()) <= c.n_best);
      std::set<std::vector<int32_t>> distinct;
      for (size_t i = 0; i < got[s].size(); ++i) {
        const Hypothesis& h = got[s][i];
        for (const std::vector<int32_t>& phrase : batch[s].constraints) CHECK(contains(h.tokens, phrase));
        CHECK(std::equal(batch[s].prefix.begin(), batch[s].prefix.end(), h.tokens.begin()));
        CHECK(static_cast<int64_t>(h.tokens.size()) <= batch[s].max_len);
        CHECK(std::find(h.tokens.begin(), h.tokens.end(), kEosId) == h.tokens.end());
        CHECK(h.token_log_probs.size() == h.tokens.size() + 1);
        double sum = 0;
        for (float lp : h.token_log_probs) sum += lp;
        CHECK(sum == Approx(h.log_prob).margin(1e-9));
        CHECK(h.score == Approx(h.log_prob / length_penalty(static_cast<int64_t>(h.tokens.size()) + 1, o.alpha,
                                                            o.length_penalty)).epsilon(1e-12));
        if (i > 0) CHECK(got[s][i - 1].score >= h.score);
        distinct.insert(h.tokens);
      }
      CHECK(distinct.size() == got[s].size());
    }
  }
  // At the tightest length, the output is the plan: every token a
  // constraint's.
  SearchRequest tight = batch[3];
  tight.prefix.clear();
  tight.max_len = forced_length(tight);
  for (const int64_t W : {int64_t{1}, int64_t{4}}) {
    const auto got = search(*model, {tight}, BeamSearchOptions{.beam_size = W});
    REQUIRE(got[0].size() == 1);
    for (const std::vector<int32_t>& phrase : tight.constraints) CHECK(contains(got[0][0].tokens, phrase));
  }
}

TEST_CASE("sentences without prefix or constraints search as before beside ones with them", "[constraints][invariance]") {
  const int64_t V = 19;
  const auto model = inference_model(V, 12);
  std::vector<SearchRequest> mixed = constrained_requests(9, V, 5);
  std::vector<SearchRequest> plain;
  uint64_t seed = 77;
  for (int i = 0; i < 9; ++i) {
    SearchRequest r;
    r.source = random_tokens(1 + static_cast<size_t>(i % 4), V, seed);
    r.max_len = 3 + i % 5;
    plain.push_back(r);
    mixed.insert(mixed.begin() + 2 * i, r);  // every other sentence plain
  }
  const BeamSearchOptions o{.beam_size = 4, .n_best = 2, .attention_layer = 1};
  const auto alone = search(*model, plain, o);
  const auto beside = search(*model, mixed, o);
  for (size_t i = 0; i < plain.size(); ++i) {
    INFO("sentence " << i);
    check_same(beside[2 * i], alone[i]);
    for (size_t k = 0; k < alone[i].size(); ++k) CHECK(test::same_bits(beside[2 * i][k].attention, alone[i][k].attention));
  }
}

TEST_CASE("prefixes and constraints give the same bits alone and in any batch, on one and three threads",
          "[constraints][invariance]") {
  const int64_t V = 21;
  const auto model = inference_model(V, 6);
  const std::vector<SearchRequest> requests = constrained_requests(14, V, 8);
  const BeamSearchOptions o{.beam_size = 3, .n_best = 2};
  std::vector<std::vector<Hypothesis>> want;
  for (const SearchRequest& r : requests) want.push_back(search(*model, {r}, o)[0]);
  const auto together = search(*model, requests, o);
  for (size_t i = 0; i < requests.size(); ++i) {
    INFO("sentence " << i << " in one batch");
    check_same(together[i], want[i]);
  }
  // Through decoders with room for three at a time: sentences join as others leave.
  DecoderLimits limits = limits_for(requests, o, V);
  limits.sentences = 3;
  limits.rows = search_rows(3, o);
  limits.src_tokens = 3 * limits.src_len;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(3);
  for (const int n : {1, 3}) {
    std::vector<std::unique_ptr<IncrementalDecoder>> decoders;
    for (int d = 0; d < n; ++d) decoders.push_back(std::make_unique<IncrementalDecoder>(*model, limits));
    search_stream(decoders, requests, o, [&](size_t i, std::vector<Hypothesis>&& got) {
      INFO("sentence " << i << ", " << n << " decoders");
      check_same(got, want[i]);
    });
  }
  omp_set_num_threads(threads);
}

TEST_CASE("bad prefixes and constraints are refused", "[constraints]") {
  const auto model = inference_model(13, 3);
  SearchRequest r;
  r.source = {5, 6};
  r.max_len = 6;
  const auto refused = [&](const SearchRequest& bad, const char* why) {
    CHECK_THROWS_WITH(search(*model, {bad}, BeamSearchOptions{}), Catch::Contains(why));
  };
  SearchRequest empty = r;
  empty.constraints = {{7}, {}};
  refused(empty, "empty constraint");
  SearchRequest eos = r;
  eos.prefix = {7, kEosId};
  refused(eos, "prefix holds token");
  SearchRequest outside = r;
  outside.constraints = {{13}};
  refused(outside, "constraint holds token");
  SearchRequest longer = r;
  longer.prefix = {7, 8, 9};
  longer.constraints = {{10, 11}, {12, 4}};
  refused(longer, "need 7 tokens, over its 6");
  BeamSearchOptions sampling;
  sampling.sampling.on = true;
  sampling.beam_size = sampling.n_best = 1;
  SearchRequest constrained = r;
  constrained.constraints = {{7}};
  CHECK_THROWS_WITH(search(*model, {constrained}, sampling), Catch::Contains("sampling"));
}
