// tfm-attnviz's weights on CUDA against the CPU: the same evaluation pass of
// the same model (Philox initialization is bit-identical on both devices),
// read back through Transformer::attention_probs, in fp32 and bf16; the
// GPU's maps are padded to multiples of 8, the CPU's are not.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "libcore/model/transformer.h"
#include "libcore/viz/attention.h"
#include "tests/support.h"

using namespace tfm;

TEST_CASE("cuda attention weights of a pass match the cpu", "[attnviz]") {
  ModelConfig c = ModelConfig::preset("tiny");
  c.vocab_size = 61;
  c.heads = 5;
  c.d_k = 7;
  c.d_v = 6;
  c.encoder_layers = c.decoder_layers = 3;
  ModelLimits limits;
  // Room for the padded tiles: B x max(Sa, Ta)^2 = 2 x 16^2 <= max_tokens x max_len.
  limits.max_tokens = 64;
  limits.max_len = 16;
  const HostBatch batch = HostBatch::from_pairs({{5, 6, 7, 8, 9, 10, 11}, {12, 13}},
                                                {{20, 21, 22}, {23, 24, 25, 26, 27, 28, 29, 30}});
  for (DType dtype : {DType::f32, DType::bf16}) {
    Transformer cpu(c, limits, Device::cpu()), gpu(c, limits, Device::cuda(0), dtype);
    cpu.init(9);
    gpu.init(9);
    cpu.evaluate(batch);
    gpu.evaluate(batch);
    // The GPU pads its tiles (S = 7, T = 9 with the target's first token)
    // to multiples of 8; the CPU does not.
    CHECK(cpu.attention_probs(Transformer::Attention::cross, 0).shape() == Shape{2, 5, 9, 7});
    CHECK(gpu.attention_probs(Transformer::Attention::cross, 0).shape() == Shape{2, 5, 16, 8});
    CHECK(gpu.attention_probs(Transformer::Attention::encoder, 2).shape() == Shape{2, 5, 8, 8});
    const double tol = dtype == DType::f32 ? 1e-5 : 2e-2;
    for (int64_t b = 0; b < 2; ++b) {
      viz::SentenceAttention want, got;
      const int64_t S = batch.src_lengths[static_cast<size_t>(b)], T = batch.tgt_lengths[static_cast<size_t>(b)];
      viz::read_attention(cpu, b, S, T, want);
      viz::read_attention(gpu, b, S, T, got);
      for (const auto& [name, w, g] : {std::tuple("enc", &want.enc, &got.enc), std::tuple("dec", &want.dec, &got.dec),
                                       std::tuple("cross", &want.cross, &got.cross)}) {
        REQUIRE(w->size() == g->size());
        double worst = 0;
        for (size_t i = 0; i < w->size(); ++i) worst = std::max(worst, std::abs(double((*w)[i]) - (*g)[i]));
        INFO(dtype_name(dtype) << " sentence " << b << " " << name << ": worst difference " << worst);
        CHECK(worst <= tol);
      }
    }
  }
}
