// tfm-attnviz's weights on CUDA beyond attnviz_test.cc (a batch of two in
// roomy limits): one sentence in the limits AttentionModel::run plans for
// it (max_len = max_tokens = the longer side, so the padded tiles just fit
// the planned room), the pass's cross-attention against the CUDA
// incremental decoder's step by step (what tfm-decode's alignments read),
// and the weights of a training pass, taken before attention dropout.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "libcore/decode/incremental.h"
#include "libcore/model/transformer.h"
#include "libcore/viz/attention.h"
#include "tests/support.h"

using namespace tfm;
using Kind = Transformer::Attention;

namespace {

ModelConfig viz_config() {
  ModelConfig c = ModelConfig::preset("tiny");
  c.vocab_size = 61;
  c.heads = 5;
  c.d_k = 7;
  c.d_v = 6;
  c.encoder_layers = c.decoder_layers = 2;  // read_attention draws stacks of one depth
  return c;
}

// The largest |a - b| over the three stacks' maps of two sentences' weights.
void require_maps_close(const viz::SentenceAttention& got, const viz::SentenceAttention& want, double tol) {
  for (const auto& [name, w, g] : {std::tuple("enc", &want.enc, &got.enc), std::tuple("dec", &want.dec, &got.dec),
                                   std::tuple("cross", &want.cross, &got.cross)}) {
    REQUIRE(w->size() == g->size());
    REQUIRE(!w->empty());
    double worst = 0;
    for (size_t i = 0; i < w->size(); ++i) worst = std::max(worst, std::abs(double((*w)[i]) - (*g)[i]));
    INFO(name << ": worst difference " << worst);
    CHECK(worst <= tol);
  }
}

}  // namespace

TEST_CASE("cuda attention weights of one sentence in tfm-attnviz's limits match the cpu", "[attnviz]") {
  const ModelConfig c = viz_config();
  const std::vector<int32_t> src = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};  // S = 13
  const std::vector<int32_t> tgt = {20, 21, 22, 23, 24, 25, 26, 27, 28, 29};          // T = 11
  const int64_t S = 13, T = 11;
  // AttentionModel::run: one sentence a pass, room for the longer side.
  ModelLimits limits;
  limits.max_len = limits.max_tokens = limits.loss_chunk = std::max(S, T);
  const HostBatch batch = HostBatch::from_pairs({src}, {tgt});
  for (DType dtype : {DType::f32, DType::bf16}) {
    INFO(dtype_name(dtype));
    Transformer cpu(c, limits, Device::cpu()), gpu(c, limits, Device::cuda(0), dtype);
    cpu.init(9);
    gpu.init(9);
    cpu.evaluate(batch);
    gpu.evaluate(batch);
    // Both lengths padded to 16 (tile_room: 16 head rows, 256 map elements).
    CHECK(gpu.attention_probs(Kind::cross, 0).shape() == Shape{1, 5, 16, 16});
    viz::SentenceAttention want, got;
    viz::read_attention(cpu, 0, S, T, want);
    viz::read_attention(gpu, 0, S, T, got);
    CHECK(got.layers == want.layers);
    CHECK(got.heads == want.heads);
    require_maps_close(got, want, dtype == DType::f32 ? 1e-5 : 2e-2);  // as attnviz_test.cc
  }
}

TEST_CASE("the cuda pass's cross-attention is the cuda decoder's, step by step", "[attnviz][decode]") {
  const ModelConfig c = viz_config();
  const std::vector<int32_t> src = {5, 6, 7, 8, 9, 10, 11, 12, 13};
  const std::vector<int32_t> tgt = {12, 20, 7, 5, 33, 60};
  const int64_t S = 9, T = 7, H = c.heads;
  ModelLimits limits;
  limits.max_tokens = limits.max_len = 16;
  Transformer gpu(c, limits, Device::cuda(0)), cpu(c, limits, Device::cpu());
  gpu.init(7);
  cpu.init(7);
  gpu.evaluate(HostBatch::from_pairs({src}, {tgt}));
  cpu.evaluate(HostBatch::from_pairs({src}, {tgt}));
  viz::SentenceAttention pass, cpu_pass;
  viz::read_attention(gpu, 0, S, T, pass);
  viz::read_attention(cpu, 0, S, T, cpu_pass);
  require_maps_close(pass, cpu_pass, 1e-5);
  for (int64_t layer = 0; layer < c.decoder_layers; ++layer) {
    IncrementalDecoder dec(gpu, {.sentences = 1, .src_tokens = S, .src_len = S, .rows = 1, .steps = T,
                                 .attention_layer = static_cast<int>(layer)});
    dec.start({src}, 1, T);
    double worst = 0;
    for (int64_t t = 0; t < T; ++t) {
      dec.step({{0, 0, t == 0 ? static_cast<int32_t>(c.decoder_start_id) : tgt[static_cast<size_t>(t - 1)]}});
      const std::vector<double> got = test::to_f64(dec.attention());  // (1, H, S)
      REQUIRE(got.size() == static_cast<size_t>(H * S));
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < S; ++j)
          worst = std::max(worst, std::abs(got[static_cast<size_t>(h * S + j)] -
                                           pass.map(viz::Stack::cross, layer, h)[t * S + j]));
    }
    INFO("layer " << layer << ": worst difference " << worst);
    CHECK(worst < 1e-5);  // two f32 computations of the same weights
  }
}

TEST_CASE("cuda attention weights of a training pass are taken before attention dropout, as on the cpu",
          "[attnviz]") {
  ModelConfig c = viz_config();
  c.dropout = 0.0f;
  c.attention_dropout = 0.5f;  // a dropped and rescaled row sums to anything but 1
  ModelLimits limits;
  limits.max_tokens = 64;
  limits.max_len = 16;
  const std::vector<std::vector<int32_t>> sources = {{5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, {15, 4, 16}};
  const std::vector<std::vector<int32_t>> targets = {{12, 13}, {14, 15, 16, 17, 18, 19, 20, 21, 22}};
  const HostBatch batch = HostBatch::from_pairs(sources, targets);
  Transformer cpu(c, limits, Device::cpu()), gpu(c, limits, Device::cuda(0));
  cpu.init(6);
  gpu.init(6);
  TrainStep step;  // dropout on; the same masks on both devices (dropout_test.cc)
  step.seed = 4;
  step.rng_step = 3;
  cpu.forward_backward(batch, step);
  gpu.forward_backward(batch, step);
  gpu.stream().synchronize();
  for (int64_t b = 0; b < 2; ++b) {
    INFO("sentence " << b);
    const int64_t S = batch.src_lengths[static_cast<size_t>(b)], T = batch.tgt_lengths[static_cast<size_t>(b)];
    viz::SentenceAttention want, got;
    viz::read_attention(cpu, b, S, T, want);
    viz::read_attention(gpu, b, S, T, got);
    require_maps_close(got, want, 1e-5);
    double worst = 0;  // of |row sum - 1|
    for (viz::Stack s : viz::kStacks) {
      for (int64_t l = 0; l < got.layers; ++l)
        for (int64_t h = 0; h < c.heads; ++h)
          for (int64_t q = 0; q < got.queries(s); ++q) {
            const float* row = got.map(s, l, h) + q * got.keys(s);
            double sum = 0;
            for (int64_t k = 0; k < got.keys(s); ++k) sum += row[k];
            worst = std::max(worst, std::abs(sum - 1));
          }
    }
    INFO("rows of the cuda maps: worst |sum - 1| " << worst);
    CHECK(worst < 1e-5);
  }
}
