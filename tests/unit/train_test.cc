// The optimizer pieces, and the model learning: a tiny Transformer trained
// with the paper's Adam and schedule on a copy task must drive its loss down.
#include <catch2/catch.hpp>

#include <cmath>

#include "libcore/model/model_file.h"
#include "libcore/model/model_io.h"
#include "libcore/model/transformer.h"
#include "libcore/train/optimizer.h"
#include "tests/support.h"

using namespace tfm;

TEST_CASE("the learning-rate schedule is the paper's", "[train]") {
  // Peak at step = warmup: d^-0.5 * warmup^-0.5.
  CHECK(noam_learning_rate(4000, 512, 4000) == Approx(std::pow(512.0, -0.5) * std::pow(4000.0, -0.5)).epsilon(1e-12));
  CHECK(noam_learning_rate(1, 512, 4000) == Approx(std::pow(512.0, -0.5) * std::pow(4000.0, -1.5)).epsilon(1e-12));
  CHECK(noam_learning_rate(16000, 512, 4000) == Approx(std::pow(512.0, -0.5) / 126.49110640673517).epsilon(1e-12));
  CHECK(noam_learning_rate(2000, 512, 4000, 2.0) == Approx(2 * std::pow(512.0, -0.5) * 2000 * std::pow(4000.0, -1.5)).epsilon(1e-12));
  REQUIRE_THROWS_WITH(noam_learning_rate(0, 512, 4000), Catch::Contains("must be positive"));
}

TEST_CASE("gradient norm and clipping", "[train]") {
  Stream cpu(Device::cpu());
  Tensor g = test::random({1001}, DType::f32, 5);
  double ref = 0;
  for (double x : test::to_f64(g)) ref += x * x;
  CHECK(gradient_norm(g, cpu) == Approx(std::sqrt(ref)).epsilon(1e-6));
  CHECK(clip_factor(10.0, 0.0) == 1.0f);
  CHECK(clip_factor(0.5, 1.0) == 1.0f);
  CHECK(clip_factor(4.0, 1.0) == Approx(0.25).epsilon(1e-5));
}

TEST_CASE("a tiny model learns to copy with the paper's optimizer", "[train]") {
  ModelConfig c = ModelConfig::preset("tiny");
  c.vocab_size = 16;
  c.dropout = 0.0f;
  ModelLimits limits;
  limits.max_tokens = 128;
  limits.max_len = 12;
  Transformer model(c, limits, Device::cpu());
  model.init(3);
  const auto [m, v] = model.optimizer_state();
  Adam adam(m, v);
  std::vector<std::vector<int32_t>> src, tgt;
  uint64_t r = 42;
  for (int i = 0; i < 16; ++i) {
    std::vector<int32_t> s;
    for (int j = 0; j < 3 + i % 4; ++j) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      s.push_back(static_cast<int32_t>(4 + (r >> 33) % 12));
    }
    src.push_back(s);
    tgt.push_back(s);
  }
  const HostBatch batch = HostBatch::from_pairs(src, tgt);
  double first = 0, last = 0;
  for (int step = 1; step <= 150; ++step) {
    model.zero_grads();
    TrainStep ts;
    ts.rng_step = static_cast<uint32_t>(step);
    ts.grad_scale = 1.0f / static_cast<float>(batch.target_tokens);
    const LossSums s = model.forward_backward(batch, ts);
    const double nll = s.nll / static_cast<double>(s.tokens);
    if (step == 1) first = nll;
    last = nll;
    const float clip = clip_factor(gradient_norm(model.grads(), model.stream()), 1.0);
    adam.step(model.params(), model.grads(), noam_learning_rate(step, c.d_model, 30), step, clip,
              model.stream());
  }
  // With label smoothing 0.1 over 16 words the best NLL is -log(0.9 + 0.1 / 16) = 0.099;
  // uniform guessing is log 16 = 2.77. Where it ends depends on the CPU's
  // OpenBLAS kernel in the last bits of every step, hence the margin.
  INFO("per-token NLL " << first << " -> " << last);
  CHECK(first > 2.0);
  CHECK(last < 0.15);
}

TEST_CASE("a model survives the trip through a checkpoint", "[train]") {
  const test::TempDir dir;
  const std::string path = dir.file("model.bin");
  ModelConfig c = ModelConfig::preset("tiny");
  c.pre_norm = true;
  ModelLimits limits;
  limits.max_tokens = 32;
  limits.max_len = 8;
  Transformer a(c, limits, Device::cpu());
  a.init(9);
  // No tokenizer: an embedded one must be a SentencePiece model of
  // vocab_size pieces (checked_model_config), which this test has not.
  save_model(path, a, "");
  const ModelFile file(path);
  auto b = file.load_model(limits, Device::cpu());
  CHECK(b->config() == c);
  CHECK(file.vocab() == nullptr);
  const HostBatch batch = HostBatch::from_pairs({{5, 6, 7}}, {{8, 9}});
  CHECK(a.evaluate(batch).loss == b->evaluate(batch).loss);

  ModelConfig other = c;
  other.d_ff = 48;
  Transformer wrong(other, limits, Device::cpu());
  REQUIRE_THROWS_WITH(file.load_parameters(wrong), Catch::Contains("another configuration"));
}
