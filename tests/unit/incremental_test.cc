// The incremental decoder (libcore/decode/incremental.h) against the full
// forward pass, with rows that are reordered, duplicated and dropped between
// steps as a beam search makes them: each row must get the log-probabilities
// of its own history, read through the pools without a copy.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "libcore/decode/incremental.h"
#include "libcore/model/transformer.h"
#include "tests/support.h"

using namespace tfm;

namespace {

// Small odd shapes; d_k and d_v apart from d_model / heads (Table 3 row B).
ModelConfig variant(int which) {
  ModelConfig c = ModelConfig::preset("tiny");
  c.parse("vocab_size = 29\nd_model = 16\nd_ff = 24\nheads = 2\nd_k = 6\nd_v = 5\nmax_positions = 24");
  c.pre_norm = which == 1 || which == 5;
  c.learned_positions = which == 2;
  c.share_embeddings = which != 3 && which != 5;
  if (which == 4) {  // as Marian's models are (config.h)
    c.parse("activation = silu\nposition_layout = halves\noutput_bias = true\nsource_eos = true\n"
            "decoder_start_id = 28\neos_id = 0\nencoder_layers = 3\nlayer_norm_eps = 1e-6");
  } else if (which == 5) {  // as fairseq's
    c.parse("activation = gelu\nposition_layout = fairseq\nposition_offset = 2\nscale_embeddings = false\n"
            "tie_output = false\nsource_eos = true\ndecoder_start_id = 3\ndecoder_layers = 3");
  }
  return c;
}
const char* kVariants[] = {"post-norm", "pre-norm", "learned positions", "separate embeddings",
                           "Marian's variants", "fairseq's variants"};

// Full-forward log-probabilities of target prefixes: row i of the result
// is log p(. | sources[i], prefixes[i]), (N, V) in f64.
std::vector<double> reference(Transformer& model, const std::vector<std::vector<int32_t>>& sources,
                              const std::vector<std::vector<int32_t>>& prefixes) {
  const HostBatch batch = HostBatch::from_pairs(sources, prefixes, Framing::of(model.config()));
  const std::vector<double> all = test::to_f64(model.log_probs(batch));  // (B * T, V)
  const int64_t V = model.config().vocab_size;
  std::vector<double> out;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    const int64_t row = static_cast<int64_t>(i) * batch.tgt_len + static_cast<int64_t>(prefixes[i].size());
    out.insert(out.end(), all.begin() + row * V, all.begin() + (row + 1) * V);
  }
  return out;
}

double worst_difference(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(std::isfinite(a[i]));
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst;
}

}  // namespace

TEST_CASE("the incremental decoder gives the full forward pass's log-probabilities", "[decode]") {
  ModelLimits limits;
  limits.max_tokens = 96;
  limits.max_len = 12;
  const std::vector<std::vector<int32_t>> sources = {{5, 6, 7, 8, 9}, {10, 4}, {11, 12, 13, 27}};
  for (int which = 0; which < 6; ++which) {
    const ModelConfig c = variant(which);
    Transformer model(c, limits, Device::cpu(), DType::f64);
    model.init(11);
    // The decoder reads sources as the model frames them (eos with source_eos).
    const Framing framing = Framing::of(c);
    std::vector<std::vector<int32_t>> framed;
    for (const auto& s : sources) framed.push_back(framing.source(s));
    IncrementalDecoder dec(model, {.sentences = 3, .src_tokens = 18, .src_len = 6, .rows = 4, .steps = 6});
    dec.start(framed, 4, 6);

    // Rows per step: {sentence, parent}; tokens come from a fixed stream.
    // Step 1 duplicates a row, step 2 reorders and drops one, step 3 drops
    // a sentence, step 4 duplicates again.
    const std::vector<std::vector<std::pair<int, int>>> plan = {
        {{0, 0}, {1, 0}, {2, 0}},
        {{0, 0}, {0, 0}, {1, 1}, {2, 2}},
        {{2, 3}, {0, 1}, {1, 2}},
        {{0, 1}, {2, 0}},
        {{0, 0}, {0, 0}, {2, 1}}};
    std::vector<std::vector<int32_t>> history = {{}, {}, {}};  // per row: tokens fed after bos
    int32_t next_token = 4;
    double worst = 0;
    for (size_t t = 0; t < plan.size(); ++t) {
      std::vector<IncrementalDecoder::Row> rows;
      std::vector<std::vector<int32_t>> srcs, prefixes, fed;
      for (const auto& [sentence, parent] : plan[t]) {
        std::vector<int32_t> h = t == 0 ? std::vector<int32_t>{} : history[static_cast<size_t>(parent)];
        const int32_t token = t == 0 ? framing.start : next_token;
        next_token = 4 + (next_token * 7 + 3) % (static_cast<int32_t>(c.vocab_size) - 4);
        if (t > 0) h.push_back(token);
        rows.push_back({sentence, parent, token});
        srcs.push_back(sources[static_cast<size_t>(sentence)]);
        prefixes.push_back(h);
        fed.push_back(h);
      }
      dec.step(rows);
      const std::vector<double> got = test::to_f64(dec.log_probs());
      INFO(kVariants[which] << ", step " << t);
      worst = std::max(worst, worst_difference(got, reference(model, srcs, prefixes)));
      history = fed;
    }
    INFO(kVariants[which] << ": worst difference " << worst);
    CHECK(worst < 1e-10);
  }
}

TEST_CASE("the decoder's top-k and eos log-probabilities agree with its full log-softmax", "[decode]") {
  const ModelConfig c = variant(0);
  ModelWeights model(c, Device::cpu());
  model.init(4);
  IncrementalDecoder dec(model, {.sentences = 2, .src_tokens = 8, .src_len = 4, .rows = 2, .steps = 3, .top_k = 5});
  dec.start({{5, 6, 7, 8}, {9}}, 2, 3);
  dec.step({{0, 0, kBosId}, {1, 0, kBosId}});
  std::vector<double> values;
  std::vector<int32_t> ids;
  dec.top_k(5, values, ids);
  const std::vector<double> full = test::to_f64(dec.log_probs());
  const std::vector<double> eos = dec.log_prob_of(kEosId);
  for (int64_t r = 0; r < 2; ++r) {
    std::vector<int32_t> order(static_cast<size_t>(c.vocab_size));
    for (int32_t v = 0; v < c.vocab_size; ++v) order[static_cast<size_t>(v)] = v;
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return full[static_cast<size_t>(r * c.vocab_size + a)] > full[static_cast<size_t>(r * c.vocab_size + b)];
    });
    for (int64_t i = 0; i < 5; ++i) {
      CHECK(ids[static_cast<size_t>(r * 5 + i)] == order[static_cast<size_t>(i)]);
      CHECK(values[static_cast<size_t>(r * 5 + i)] ==
            Approx(full[static_cast<size_t>(r * c.vocab_size + order[static_cast<size_t>(i)])]).margin(1e-5));
    }
    CHECK(eos[static_cast<size_t>(r)] == Approx(full[static_cast<size_t>(r * c.vocab_size + kEosId)]).margin(1e-5));
  }
  // The plan is the decoder's; the weights are the parameters alone.
  CHECK(model.memory_report().find("gradients") == std::string::npos);
  CHECK(dec.memory_report().find("kv-cache") != std::string::npos);
  REQUIRE_THROWS_WITH(dec.start({{5, 6, 7, 8, 9}}, 2, 3), Catch::Contains("over the planned"));
  REQUIRE_THROWS_WITH(dec.start({{5}}, 2, 4), Catch::Contains("over the plan"));
}
