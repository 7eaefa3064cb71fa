// Sampling on CUDA against the CPU: the draws are the same function of
// (seed, sentence, sample, position) on both, and the log-probabilities
// they read agree to f32 accuracy, so in fp32 the samples are the CPU's
// (a draw within ~1e-6 of a boundary between two tokens could differ: one
// sentence in the batch is allowed to); in bf16 they are well formed.
#include <catch2/catch.hpp>

#include <algorithm>

#include "libcore/decode/search.h"
#include "tests/support.h"

using namespace tfm;

TEST_CASE("sampling on cuda draws the cpu's samples in fp32", "[decode]") {
  ModelConfig c = ModelConfig::preset("tiny");
  c.parse("vocab_size = 97\nd_model = 48\nd_ff = 80\nheads = 3\nd_k = 16\nd_v = 16\nmax_positions = 64");
  ModelWeights cpu(c, Device::cpu());
  cpu.init(17);
  std::vector<SearchRequest> batch;
  for (int i = 0; i < 6; ++i) {
    SearchRequest r;
    for (int j = 0; j < 2 + i; ++j) r.source.push_back(4 + (i * 13 + j * 7) % 90);
    r.max_len = 10;
    r.key = static_cast<uint64_t>(i + 1);
    batch.push_back(r);
  }
  BeamSearchOptions o;
  o.sampling.on = true;
  o.sampling.seed = 4;
  o.sampling.top_p = 0.95;
  o.beam_size = o.n_best = 3;
  DecoderLimits l{.sentences = 6, .src_tokens = 6 * 8, .src_len = 8, .rows = 18, .steps = 11};
  IncrementalDecoder dc(cpu, l);
  const auto want = beam_search(dc, batch, o);
  for (DType dtype : {DType::f32, DType::bf16}) {
    ModelWeights gpu(c, Device::cuda(0), dtype);
    gpu.init(17);
    gpu.refresh_weights();
    IncrementalDecoder dg(gpu, l);
    const auto got = beam_search(dg, batch, o);
    int differ = 0;
    for (size_t s = 0; s < batch.size(); ++s) {
      REQUIRE(got[s].size() == 3);
      bool same = true;
      for (size_t j = 0; j < 3; ++j) {
        const Hypothesis& h = got[s][j];
        CHECK(static_cast<int64_t>(h.tokens.size()) <= batch[s].max_len);
        CHECK(h.token_log_probs.size() == h.tokens.size() + 1);
        for (int32_t t : h.tokens) CHECK((t >= 0 && t < c.vocab_size && t != c.eos_id));
        same &= h.tokens == want[s][j].tokens;
        if (dtype == DType::f32 && h.tokens == want[s][j].tokens)
          CHECK(h.log_prob == Approx(want[s][j].log_prob).margin(1e-4));
      }
      differ += !same;
    }
    INFO(dtype_name(dtype) << ": " << differ << " of 6 sentences' samples differ from the cpu's");
    if (dtype == DType::f32) CHECK(differ <= 1);
  }
}
