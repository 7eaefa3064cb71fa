// Ensembles on CUDA: the mixed logits (scaled_difference and add on the
// device, across the members' streams) against the CPU's, and copies of
// one model searching as the model alone, bit for bit, on the GPU too.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/ops.h"
#include "libcore/decode/search.h"
#include "tests/support.h"

using namespace tfm;

TEST_CASE("cuda scaled_difference matches the cpu", "[decode]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Tensor x = test::random({37, 41}, dtype, 1), base = test::random({37, 41}, dtype, 2);
    const Tensor gx = test::to_device(x, gpu), gb = test::to_device(base, gpu);
    Tensor gy({37, 41}, dtype, gpu), y64({37, 41}, DType::f64);
    ops::scaled_difference(gx, gb, 0.375f, gy, cuda);
    ops::scaled_difference(test::cast(x, DType::f64), test::cast(base, DType::f64), 0.375f, y64, cpu);
    cuda.synchronize();
    INFO(dtype_name(dtype));
    test::require_close({{"y", gy, test::to_f64(y64), test::tolerance_for(dtype, 2)}});
  }
}

TEST_CASE("an ensemble on cuda matches the cpu's, and copies search as the model alone", "[decode]") {
  ModelConfig c = ModelConfig::preset("tiny");
  c.parse("vocab_size = 97\nd_model = 48\nd_ff = 80\nheads = 3\nd_k = 16\nd_v = 16\nmax_positions = 64");
  ModelWeights ca(c, Device::cpu()), cb(c, Device::cpu());
  ModelWeights ga(c, Device::cuda(0)), gb(c, Device::cuda(0));
  ca.init(31);
  cb.init(32);
  ga.init(31);
  gb.init(32);
  ga.refresh_weights();
  gb.refresh_weights();
  std::vector<SearchRequest> batch;
  for (int i = 0; i < 4; ++i) {
    SearchRequest r;
    for (int j = 0; j < 3 + i; ++j) r.source.push_back(4 + (i * 11 + j * 5) % 90);
    r.max_len = 8;
    batch.push_back(r);
  }
  BeamSearchOptions o;
  o.n_best = 2;
  DecoderLimits l{.sentences = 4, .src_tokens = 4 * 7, .src_len = 7, .rows = 16, .steps = 9, .top_k = 8};
  IncrementalDecoder xa(ca, l), xb(cb, l), ya(ga, l), yb(gb, l), yc(ga, l);
  const auto want = beam_search(Team{{&xa, &xb}, {1, 3}}, batch, o);
  const auto got = beam_search(Team{{&ya, &yb}, {1, 3}}, batch, o);
  for (size_t s = 0; s < batch.size(); ++s) {
    REQUIRE(got[s].size() == want[s].size());
    for (size_t i = 0; i < got[s].size(); ++i) CHECK(got[s][i].score == Approx(want[s][i].score).margin(1e-4));
  }
  const auto alone = beam_search(ya, batch, o), copies = beam_search(Team{{&ya, &yc}, {1, 1}}, batch, o);
  for (size_t s = 0; s < batch.size(); ++s)
    for (size_t i = 0; i < alone[s].size(); ++i) {
      CHECK(copies[s][i].tokens == alone[s][i].tokens);
      CHECK(copies[s][i].log_prob == alone[s][i].log_prob);
    }
}
