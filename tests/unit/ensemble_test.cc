// Ensembles (libcore/decode/search.h, Team; IncrementalDecoder::mix_logits):
// the mixed distribution against the members' log-probabilities mixed by
// hand, copies of one model against that model alone (bit for bit, beam
// search and sampling), a zero weight against leaving that model out, and
// search_stream on teams against beam_search.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>

#include "libcore/decode/search.h"
#include "tests/support.h"
#include "tests/unit/search_fixtures.h"

using namespace tfm;

namespace {

ModelConfig small_config() { return test::small_config(37); }

std::vector<SearchRequest> requests() {
  std::vector<SearchRequest> out;
  for (int i = 0; i < 5; ++i) {
    SearchRequest r;
    for (int j = 0; j < 2 + i; ++j) r.source.push_back(4 + (i * 7 + j * 5) % 33);
    r.max_len = 9;
    r.key = static_cast<uint64_t>(i + 1);
    out.push_back(r);
  }
  return out;
}

DecoderLimits limits(const BeamSearchOptions& o) {
  return {.sentences = 5, .src_tokens = 5 * 6, .src_len = 6, .rows = 5 * o.beam_size, .steps = 10,
          .top_k = 2 * o.beam_size};
}

bool same(const std::vector<std::vector<Hypothesis>>& a, const std::vector<std::vector<Hypothesis>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t s = 0; s < a.size(); ++s) {
    if (a[s].size() != b[s].size()) return false;
    for (size_t i = 0; i < a[s].size(); ++i)
      if (a[s][i].tokens != b[s][i].tokens || a[s][i].log_prob != b[s][i].log_prob ||
          a[s][i].score != b[s][i].score || a[s][i].token_log_probs != b[s][i].token_log_probs)
        return false;
  }
  return true;
}

}  // namespace

TEST_CASE("an ensemble's distribution is the log-softmax of its members' weighted log-probabilities",
          "[ensemble]") {
  ModelWeights a(small_config(), Device::cpu()), b(small_config(), Device::cpu()), c(small_config(), Device::cpu());
  a.init(1);
  b.init(2);
  c.init(3);
  BeamSearchOptions o;
  IncrementalDecoder da(a, limits(o)), db(b, limits(o)), dc(c, limits(o));
  const std::vector<std::vector<int32_t>> sources = {{5, 6, 7}, {8, 9}};
  const std::vector<IncrementalDecoder::Row> rows = {{0, 0, 1}, {1, 0, 1}, {1, 0, 1}};
  std::vector<std::vector<double>> lp;
  for (IncrementalDecoder* d : {&da, &db, &dc}) {
    d->start(sources, 3, 2);
    d->step(rows);
    lp.push_back(test::to_f64(d->log_probs()));
  }
  const std::vector<double> w = {1.0, 2.5, 0.5};
  da.mix_logits({&db, &dc}, w);
  const std::vector<double> mixed = test::to_f64(da.log_probs());
  const int64_t V = a.config().vocab_size;
  for (int64_t r = 0; r < 3; ++r) {
    // log-softmax(sum_i w_i lp_i / W): the members' log-linear mix, normalized.
    std::vector<double> z(static_cast<size_t>(V));
    double top = -1e300, sum = 0;
    for (int64_t v = 0; v < V; ++v) {
      const size_t i = static_cast<size_t>(r * V + v);
      z[static_cast<size_t>(v)] = (w[0] * lp[0][i] + w[1] * lp[1][i] + w[2] * lp[2][i]) / 4.0;
      top = std::max(top, z[static_cast<size_t>(v)]);
    }
    for (double x : z) sum += std::exp(x - top);
    for (int64_t v = 0; v < V; ++v)
      CHECK(mixed[static_cast<size_t>(r * V + v)] ==
            Approx(z[static_cast<size_t>(v)] - top - std::log(sum)).margin(1e-5));
  }
}

TEST_CASE("an ensemble of copies searches as the model alone, bit for bit, and a zero weight leaves a model out",
          "[ensemble]") {
  ModelWeights a(small_config(), Device::cpu()), b(small_config(), Device::cpu());
  a.init(11);
  b.init(12);
  const std::vector<SearchRequest> batch = requests();
  BeamSearchOptions beam;
  beam.n_best = 3;
  BeamSearchOptions sample;
  sample.sampling.on = true;
  sample.beam_size = sample.n_best = 2;
  for (const BeamSearchOptions& o : {beam, sample}) {
    INFO((o.sampling.on ? "sampling" : "beam search"));
    IncrementalDecoder alone(a, limits(o)), c1(a, limits(o)), c2(a, limits(o)), c3(a, limits(o));
    const auto want = beam_search(alone, batch, o);
    CHECK(same(beam_search(Team{{&c1, &c2, &c3}, {1, 1, 1}}, batch, o), want));
    CHECK(same(beam_search(Team{{&c1, &c2}, {0.3, 0.7}}, batch, o), want));
    IncrementalDecoder other(b, limits(o));
    CHECK(same(beam_search(Team{{&c1, &other}, {1, 0}}, batch, o), want));
    CHECK_FALSE(same(beam_search(Team{{&c1, &other}, {1, 1}}, batch, o), want));
  }
}

TEST_CASE("search_stream on ensembles, one a thread, gives beam_search's results", "[ensemble]") {
  ModelWeights a(small_config(), Device::cpu()), b(small_config(), Device::cpu());
  a.init(21);
  b.init(22);
  const std::vector<SearchRequest> batch = requests();
  BeamSearchOptions o;
  o.n_best = 2;
  IncrementalDecoder x(a, limits(o)), y(b, limits(o));
  const auto want = beam_search(Team{{&x, &y}, {1, 2}}, batch, o);
  std::vector<std::unique_ptr<IncrementalDecoder>> keep;
  std::vector<Team> teams;
  for (int t = 0; t < 2; ++t) {
    Team& team = teams.emplace_back();
    for (const ModelWeights* m : {&a, &b}) {
      DecoderLimits l = limits(o);
      l.sentences = 2;
      l.rows = 2 * o.beam_size;
      l.src_tokens = 2 * 6;
      team.members.push_back(keep.emplace_back(std::make_unique<IncrementalDecoder>(*m, l)).get());
    }
    team.weights = {1, 2};
  }
  std::vector<std::vector<Hypothesis>> got(batch.size());
  search_stream(teams, batch, o, [&](size_t i, std::vector<Hypothesis>&& nbest) { got[i] = std::move(nbest); });
  CHECK(same(got, want));
}
