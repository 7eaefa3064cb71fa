// Sampling (libcore/decode/search.h, SamplingOptions): sample_token's cuts
// against hand-computed sets, the draws' distribution against the model's
// softmax at a fixed step (chi-square), and the search: samples that do not
// depend on the batch or the other sentences, that follow the seed, whose
// scores are the model's, and top-k 1 as greedy search.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "libcore/decode/search.h"
#include "tests/support.h"
#include "tests/unit/search_fixtures.h"

using namespace tfm;
using test::limits_for;
using test::small_config;

namespace {

std::vector<SearchRequest> requests(int count, int64_t vocab, uint64_t seed) {
  std::vector<SearchRequest> out;
  for (int i = 0; i < count; ++i) {
    SearchRequest r;
    for (int j = 0; j < 1 + i % 5; ++j) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      r.source.push_back(static_cast<int32_t>(4 + (seed >> 33) % static_cast<uint64_t>(vocab - 4)));
    }
    r.max_len = 12;
    r.key = 100 + static_cast<uint64_t>(i);
    out.push_back(r);
  }
  return out;
}

BeamSearchOptions sampling(int64_t n, uint64_t seed) {
  BeamSearchOptions o;
  o.sampling.on = true;
  o.sampling.seed = seed;
  o.beam_size = o.n_best = n;
  return o;
}

// The probabilities sample_token draws from: tempered, cut, renormalized
// (written out plainly, as the reference).
std::map<int32_t, double> expected(const std::vector<double>& lp, const SamplingOptions& o) {
  std::vector<int32_t> ids(lp.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return lp[a] != lp[b] ? lp[a] > lp[b] : a < b; });
  if (o.top_k > 0 && static_cast<size_t>(o.top_k) < ids.size()) ids.resize(static_cast<size_t>(o.top_k));
  std::vector<double> w;
  double total = 0;
  for (int32_t v : ids) total += w.emplace_back(std::exp(lp[v] / o.temperature));
  size_t kept = ids.size();
  if (o.top_p < 1) {
    double sum = 0;
    for (kept = 0; kept < ids.size() && sum < o.top_p * total;) sum += w[kept++];
  }
  double z = 0;
  for (size_t i = 0; i < kept; ++i) z += w[i];
  std::map<int32_t, double> p;
  for (size_t i = 0; i < kept; ++i) p[ids[i]] = w[i] / z;
  return p;
}

}  // namespace

TEST_CASE("sample_token: temperature, top-k and top-p cut exactly the tokens they should", "[sampling]") {
  // Probabilities 0.5, 0.05, 0.3, 0.1, 0.05 (ids 0-4).
  const std::vector<double> lp = {std::log(0.5), std::log(0.05), std::log(0.3), std::log(0.1), std::log(0.05)};
  std::vector<int32_t> scratch;
  const auto drawn = [&](const SamplingOptions& o, int32_t barred) {
    std::set<int32_t> out;
    for (int i = 0; i < 1000; ++i) out.insert(sample_token(lp.data(), 5, o, (i + 0.5) / 1000, barred, scratch));
    return out;
  };
  SamplingOptions o;
  CHECK(drawn(o, -1) == std::set<int32_t>{0, 1, 2, 3, 4});
  CHECK(drawn(o, 2) == std::set<int32_t>{0, 1, 3, 4});  // a barred token (eos before min_len)
  o.top_k = 2;
  CHECK(drawn(o, -1) == std::set<int32_t>{0, 2});
  o.top_k = 0;
  o.top_p = 0.75;  // 0.5 < 0.75 <= 0.8: the two most likely
  CHECK(drawn(o, -1) == std::set<int32_t>{0, 2});
  o.top_p = 0.85;  // 0.8 < 0.85 <= 0.9: and id 3
  CHECK(drawn(o, -1) == std::set<int32_t>{0, 2, 3});
  o.top_p = 1e-9;  // at least the most likely
  CHECK(drawn(o, -1) == std::set<int32_t>{0});
  o.top_p = 0.85;
  o.top_k = 4;  // top-p on top-k's renormalized 0.5/0.95, 0.3/0.95, ...: 0.84 < 0.85, so id 3 too
  CHECK(drawn(o, -1) == std::set<int32_t>{0, 2, 3});
  // Without cuts the draw walks the ids in order: u below 0.5 is id 0, then
  // id 1 up to 0.55, id 2 up to 0.85.
  SamplingOptions plain;
  CHECK(sample_token(lp.data(), 5, plain, 0.49, -1, scratch) == 0);
  CHECK(sample_token(lp.data(), 5, plain, 0.52, -1, scratch) == 1);
  CHECK(sample_token(lp.data(), 5, plain, 0.84, -1, scratch) == 2);
  CHECK(sample_token(lp.data(), 5, plain, 0.9999, -1, scratch) == 4);
  // A low temperature sharpens toward the most likely.
  plain.temperature = 0.05;
  CHECK(sample_token(lp.data(), 5, plain, 0.999, -1, scratch) == 0);
}

TEST_CASE("sampled tokens follow the model's softmax at a step (chi-square)", "[sampling]") {
  const int64_t V = 40;
  ModelWeights model(small_config(V), Device::cpu());
  model.init(3);
  std::vector<SearchRequest> batch = requests(1, V, 9);
  BeamSearchOptions o = sampling(1, 1);
  IncrementalDecoder dec(model, limits_for(batch, o, V));
  dec.start({batch[0].source}, 1, 4);
  dec.step({{0, 0, static_cast<int32_t>(model.config().decoder_start_id)}});
  const std::vector<double> lp = test::to_f64(dec.log_probs());  // (1, V)
  struct Case { int64_t top_k; double top_p, temperature; };
  for (const Case& c : {Case{0, 1.0, 1.0}, Case{0, 1.0, 0.7}, Case{10, 1.0, 1.0}, Case{0, 0.9, 1.0}, Case{8, 0.8, 1.3}}) {
    SamplingOptions s;
    s.top_k = c.top_k;
    s.top_p = c.top_p;
    s.temperature = c.temperature;
    const std::map<int32_t, double> p = expected(lp, s);
    // 40,000 draws, as the search draws them: one sample each, keys apart.
    const int draws = 40000;
    std::map<int32_t, int> counts;
    std::vector<int32_t> scratch;
    for (int i = 0; i < draws; ++i)
      ++counts[sample_token(lp.data(), V, s, sample_uniform(7, static_cast<uint64_t>(i), 0, 0), -1, scratch)];
    // Every draw inside the kept set; chi-square over the kept tokens (those
    // expected fewer than 5 times pooled), against the 0.1% critical value
    // (Wilson-Hilferty).
    double chi2 = 0, pooled_expect = 0, pooled_seen = 0;
    int cells = 0;
    for (const auto& [token, n] : counts) REQUIRE(p.count(token) == 1);
    for (const auto& [token, q] : p) {
      const double e = q * draws, seen = counts.count(token) ? counts[token] : 0;
      if (e < 5) {
        pooled_expect += e, pooled_seen += seen;
        continue;
      }
      chi2 += (seen - e) * (seen - e) / e;
      ++cells;
    }
    if (pooled_expect > 0) chi2 += (pooled_seen - pooled_expect) * (pooled_seen - pooled_expect) / pooled_expect, ++cells;
    const double k = std::max(1, cells - 1), z = 3.09;  // one-sided 0.1%
    const double critical = k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
    INFO("top-k " << c.top_k << " top-p " << c.top_p << " temperature " << c.temperature << ": chi-square " << chi2
                  << " over " << cells << " cells, critical " << critical);
    CHECK(chi2 < critical);
  }
}

TEST_CASE("samples depend on the seed and the sentence alone, and are the model's", "[sampling]") {
  const int64_t V = 30;
  ModelWeights model(small_config(V), Device::cpu());
  model.init(5);
  const std::vector<SearchRequest> batch = requests(7, V, 21);
  const BeamSearchOptions o = sampling(3, 11);
  IncrementalDecoder all(model, limits_for(batch, o, V));
  const auto together = beam_search(all, batch, o);
  bool seeds_differ = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    INFO("sentence " << i);
    REQUIRE(together[i].size() == 3);
    // Alone, and in another batch (reversed): the same bits.
    IncrementalDecoder one(model, limits_for({batch[i]}, o, V));
    const auto alone = beam_search(one, {batch[i]}, o);
    for (size_t j = 0; j < 3; ++j) {
      CHECK(alone[0][j].tokens == together[i][j].tokens);
      CHECK(alone[0][j].log_prob == together[i][j].log_prob);
      CHECK(alone[0][j].token_log_probs == together[i][j].token_log_probs);
      // The log-probability is the model's tokens' sum, eos included.
      double sum = 0;
      for (float x : together[i][j].token_log_probs) sum += x;
      CHECK(together[i][j].log_prob == Approx(sum).epsilon(1e-5));
      CHECK(together[i][j].token_log_probs.size() == together[i][j].tokens.size() + 1);
      CHECK(static_cast<int64_t>(together[i][j].tokens.size()) <= batch[i].max_len);
    }
    IncrementalDecoder other(model, limits_for({batch[i]}, sampling(3, 12), V));
    seeds_differ |= beam_search(other, {batch[i]}, sampling(3, 12))[0][0].tokens != together[i][0].tokens;
  }
  CHECK(seeds_differ);
  std::vector<SearchRequest> reversed(batch.rbegin(), batch.rend());
  IncrementalDecoder again(model, limits_for(reversed, o, V));
  const auto backwards = beam_search(again, reversed, o);
  for (size_t i = 0; i < batch.size(); ++i)
    CHECK(backwards[batch.size() - 1 - i][2].tokens == together[i][2].tokens);

  // Top-k 1 draws the most likely token: greedy search.
  BeamSearchOptions top1 = sampling(1, 3), greedy;
  top1.sampling.top_k = 1;
  greedy.beam_size = 1;
  greedy.alpha = top1.alpha;
  IncrementalDecoder d1(model, limits_for(batch, top1, V)), d2(model, limits_for(batch, greedy, V));
  const auto a = beam_search(d1, batch, top1), b = beam_search(d2, batch, greedy);
  for (size_t i = 0; i < batch.size(); ++i) CHECK(a[i][0].tokens == b[i][0].tokens);
}
