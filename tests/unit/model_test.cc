// The model as a whole: parameter counts against the paper's Table 3, and
// the gradient of the loss against finite differences in double (the
// incremental decoder is held to the full forward pass in incremental_test.cc).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "libcore/model/transformer.h"
#include "tests/support.h"

using namespace tfm;

namespace {

struct Row {
  const char* name;
  const char* overrides;  // the Table 3 cells that differ from base
  double paper_millions;  // 0 where the paper gives no figure
  int64_t pinned;         // the closed-form count with V = 37,000
};

// Pinned from the closed form (ModelConfig::parameter_count): shared
// embedding V x D once; per layer Q, K, V, O with biases, the two
// feed-forward layers, two (encoder) or three (decoder) layer norms.
const Row kTable3[] = {
    {"base", "", 65, 63082496},
    {"A h=1", "heads = 1\nd_k = 512\nd_v = 512", 0, 63082496},
    {"A h=4", "heads = 4\nd_k = 128\nd_v = 128", 0, 63082496},
    {"A h=16", "heads = 16\nd_k = 32\nd_v = 32", 0, 63082496},
    {"A h=32", "heads = 32\nd_k = 16\nd_v = 16", 0, 63082496},
    {"B d_k=16", "d_k = 16", 58, 55990784},
    {"B d_k=32", "d_k = 32", 60, 58354688},
    {"C N=2", "layers = 2", 36, 33656832},
    {"C N=4", "layers = 4", 50, 48369664},
    {"C N=8", "layers = 8", 80, 77795328},
    {"C d_model=256", "d_model = 256\nd_k = 32\nd_v = 32", 28, 26834944},
    {"C d_model=1024", "d_model = 1024\nd_k = 128\nd_v = 128", 168, 163889152},
    {"C d_ff=1024", "d_ff = 1024", 53, 50487296},
    {"C d_ff=4096", "d_ff = 4096", 90, 88272896},
    {"E learned positions", "learned_positions = true", 0, 64131072},
    {"big", "d_model = 1024\nd_ff = 4096\nheads = 16\ndropout = 0.3", 213, 214245376},
};

}  // namespace

TEST_CASE("parameter counts of every Table 3 row match the closed form", "[model]") {
  for (const Row& row : kTable3) {
    ModelConfig c = ModelConfig::preset("base");
    c.parse(row.overrides);
    const ParamLayout layout(c);
    std::printf("  %-22s %11lld parameters (%6.1fM)  paper %s\n", row.name,
                static_cast<long long>(layout.count()), layout.count() / 1e6,
                row.paper_millions > 0 ? fmt::format("{}M", row.paper_millions).c_str() : "-");
    INFO(row.name);
    CHECK(layout.count() == c.parameter_count());
    CHECK(layout.count() == row.pinned);
    if (row.paper_millions > 0) CHECK(std::abs(layout.count() / 1e6 - row.paper_millions) / row.paper_millions < 0.1);
  }
  // The presets the paper names.
  CHECK(ParamLayout(ModelConfig::preset("big")).count() == 214245376);
}

TEST_CASE("the q, k and v projections of an attention lie side by side", "[model]") {
  ModelConfig c = ModelConfig::preset("tiny");
  c.d_k = 3;  // odd sizes: a group has no alignment gaps inside
  c.d_v = 5;
  const ParamLayout layout(c);
  const int64_t HK = c.heads * c.d_k, HE = c.heads * c.d_v, D = c.d_model;
  Tensor flat({layout.total()}, DType::f32);
  for (const AttentionIds& a : {layout.encoder[0].self_attn, layout.decoder[1].cross_attn}) {
    const TensorView qkv = layout.view(flat, a.q.weight, a.v.weight);
    CHECK(qkv.shape() == Shape{2 * HK + HE, D});
    CHECK(qkv.data() == layout.view(flat, a.q.weight).data());
    CHECK(layout.view(flat, a.k.weight, a.v.weight).shape() == Shape{HK + HE, D});
    CHECK(layout.view(flat, a.q.bias, a.v.bias).shape() == Shape{2 * HK + HE});
    CHECK(layout.view(flat, a.k.bias).data() ==
          static_cast<float*>(layout.view(flat, a.q.bias).data()) + HK);
    // Groups start aligned; what is not a group is refused.
    CHECK(layout.entry(a.q.weight).offset % ParamLayout::kAlign == 0);
    CHECK(layout.entry(a.q.bias).offset % ParamLayout::kAlign == 0);
    CHECK_THROWS_WITH(layout.view(flat, a.v.weight, a.q.bias), Catch::Contains("not one group"));
    CHECK_THROWS_WITH(layout.view(flat, a.out.weight, a.out.bias), Catch::Contains("not one group"));
  }
}

TEST_CASE("configs round-trip through text and reject what they do not know", "[model]") {
  ModelConfig c = ModelConfig::preset("big");
  c.pre_norm = true;
  c.attention_dropout = 0.2f;
  ModelConfig back = ModelConfig::preset("tiny");
  back.parse(c.to_text());
  CHECK(back == c);
  ModelConfig d;
  REQUIRE_THROWS_WITH(d.parse("layers = 2\nwidth = 3\n", "x.ini"), Catch::Contains("unknown key 'width'"));
  try {
    d.parse("layers = 2\n\nheads = zero\n", "x.ini");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("heads must be an integer") != std::string::npos);
    CHECK(e.where() == "x.ini:3");
  }
  REQUIRE_THROWS_WITH(d.set("dropout", "1.5"), Catch::Contains("dropout must be between 0 and 0.99, got 1.5"));
  REQUIRE_THROWS_WITH(ModelConfig::preset("huge"), Catch::Contains("expected base, big or tiny"));
}

namespace {

ModelConfig tiny_variant(int variant) {
  ModelConfig c = ModelConfig::preset("tiny");
  c.vocab_size = 23;
  c.d_model = 12;
  c.d_ff = 20;
  c.heads = 3;
  c.d_k = 5;  // d_k, d_v independent of d_model / heads (Table 3 row B)
  c.d_v = 3;
  c.max_positions = 16;
  c.dropout = 0.1f;
  c.attention_dropout = 0.1f;
  c.label_smoothing = 0.1f;
  if (variant == 1) c.pre_norm = true;
  if (variant == 2) c.learned_positions = true;
  if (variant == 3) c.share_embeddings = false;
  return c;
}

const char* kVariantNames[] = {"post-norm", "pre-norm", "learned positions", "separate embeddings"};

HostBatch test_batch(int64_t vocab) {
  // Odd lengths on both sides, padding in every sentence but one.
  const std::vector<std::vector<int32_t>> src = {{5, 6, 7, 8, 9}, {10, 4}, {11, 12, 13}};
  const std::vector<std::vector<int32_t>> tgt = {{14, 15}, {16, 17, 18, 19}, {static_cast<int32_t>(vocab - 1)}};
  return HostBatch::from_pairs(src, tgt);
}

}  // namespace

TEST_CASE("the loss gradient equals finite differences in double", "[model]") {
  ModelLimits limits;
  limits.max_tokens = 64;
  limits.max_len = 16;
  limits.loss_chunk = 4;  // several chunks of the output layer
  for (int variant = 0; variant < 4; ++variant) {
    const ModelConfig c = tiny_variant(variant);
    Transformer model(c, limits, Device::cpu(), DType::f64);
    model.init(7);
    const HostBatch batch = test_batch(c.vocab_size);
    TrainStep step;
    step.seed = 99;
    step.rng_step = 3;
    model.zero_grads();
    const LossSums sums = model.forward_backward(batch, step);
    REQUIRE(sums.tokens == batch.target_tokens);
    REQUIRE(std::isfinite(sums.loss));
    const std::vector<double> grads = test::to_f64(model.grads());
    double* p = model.params().data_as<double>();
    auto loss = [&] { return model.forward_backward(batch, step).loss; };  // grads are ignored

    // Two elements of every tensor, central differences.
    double worst = 0;
    std::string worst_name;
    uint64_t pick = 12345;
    for (const ParamEntry& e : model.layout().entries()) {
      for (int k = 0; k < 2; ++k) {
        pick = pick * 6364136223846793005ull + 1442695040888963407ull;
        int64_t index = e.offset + static_cast<int64_t>((pick >> 33) % static_cast<uint64_t>(e.shape.numel()));
        if (e.name.find("embed_tokens") != std::string::npos || e.name == "embed.weight")
          index = e.offset + 14 * c.d_model + k;  // a row the batch uses
        const double keep = p[index], h = 1e-5;
        p[index] = keep + h;
        const double up = loss();
        p[index] = keep - h;
        const double down = loss();
        p[index] = keep;
        const double numeric = (up - down) / (2 * h);
        const double analytic = grads[static_cast<size_t>(index)];
        REQUIRE(std::isfinite(numeric));
        REQUIRE(std::isfinite(analytic));
        const double err = std::abs(numeric - analytic) / std::max(1e-3, std::abs(numeric));
        if (err > worst) {
          worst = err;
          worst_name = fmt::format("{}[{}]: analytic {:.10g} numeric {:.10g}", e.name,
                                   index - e.offset, analytic, numeric);
        }
      }
    }
    INFO(kVariantNames[variant] << ": worst " << worst_name);
    CHECK(worst < 1e-5);
  }
}

// What test::without_key_biases (support.h) rests on, for the cuda tests
// that compare parameters after Adam: a constant added to all of a query's
// scores leaves its softmax unchanged, so the key projections' biases get
// no gradient; what a device computes for them is rounding, far below
// every other parameter's gradient.
TEST_CASE("the key projections' biases get only rounding for a gradient", "[model]") {
  ModelLimits limits;
  limits.max_tokens = 64;
  limits.max_len = 16;
  for (int variant = 0; variant < 4; ++variant) {
    const ModelConfig c = tiny_variant(variant);
    Transformer model(c, limits, Device::cpu());
    model.init(11);
    TrainStep step;
    step.seed = 5;
    model.zero_grads();
    model.forward_backward(test_batch(c.vocab_size), step);
    const std::vector<double> g = test::to_f64(model.grads());
    double largest = 0, key_bias = 0;
    int64_t key_biases = 0;
    for (const ParamEntry& e : model.layout().entries()) {
      const bool is_key_bias = e.name.ends_with("k_proj.bias");
      key_biases += is_key_bias;
      for (int64_t i = e.offset; i < e.offset + e.shape.numel(); ++i) {
        const double a = std::abs(g[static_cast<size_t>(i)]);
        (is_key_bias ? key_bias : largest) = std::max(is_key_bias ? key_bias : largest, a);
      }
    }
    INFO(kVariantNames[variant] << ": largest gradient " << largest << ", largest of a key bias " << key_bias);
    CHECK(key_biases == c.encoder_layers + 2 * c.decoder_layers);  // encoder self, decoder self and cross
    CHECK(largest > 0);
    CHECK(key_bias <= 1e-5 * largest);
    // And the helper leaves out exactly those elements.
    CHECK(static_cast<int64_t>(test::without_key_biases(g, model.layout()).size()) ==
          model.layout().total() - key_biases * c.heads * c.d_k);
  }
}

TEST_CASE("the model plans its memory and refuses batches over the plan", "[model]") {
  ModelLimits limits;
  limits.max_tokens = 32;
  limits.max_len = 8;
  Transformer model(ModelConfig::preset("tiny"), limits, Device::cpu());
  const std::string report = model.memory_report();
  for (const char* kind : {"parameters", "gradients", "optimizer", "activations", "workspace", "total"})
    CHECK(report.find(kind) != std::string::npos);
  const HostBatch long_one = HostBatch::from_pairs({std::vector<int32_t>(9, 5)}, {{6}});
  REQUIRE_THROWS_WITH(model.evaluate(long_one), Catch::Contains("over the planned maximum length 8"));
  const HostBatch bad_id = HostBatch::from_pairs({{5, 64}}, {{6}});
  REQUIRE_THROWS_WITH(model.evaluate(bad_id), Catch::Contains("source id 64 is outside the vocabulary [0, 64)"));
  limits.max_len = 2000;
  REQUIRE_THROWS_WITH(Transformer(ModelConfig::preset("tiny"), limits, Device::cpu()),
                      Catch::Contains("positions"));
}

// Data-parallel training sums each piece of the gradient over the processes
// as soon as backward announces it (train/data_parallel.h): a piece must be
// final then, and the pieces must cover the buffer once.
TEST_CASE("backward announces each piece of the gradient once it is final, in gradient_order", "[model]") {
  struct Recorder final : GradientSink {
    const Transformer* model = nullptr;
    std::vector<int> pieces;
    std::vector<std::vector<double>> values;  // of each piece when announced
    void ready(int piece) override {
      pieces.push_back(piece);
      const GradientPiece p = model->gradient_order()[static_cast<size_t>(piece)];
      const std::vector<double> all = test::to_f64(model->grads());
      values.emplace_back(all.begin() + p.begin, all.begin() + p.end);
    }
  };
  for (const char* variant : {"pre_norm = false", "pre_norm = true\nlearned_positions = true\nmax_positions = 16"}) {
    ModelConfig c = ModelConfig::preset("tiny");
    c.vocab_size = 30;
    c.encoder_layers = c.decoder_layers = 3;
    c.parse(variant);
    ModelLimits limits;
    limits.max_tokens = 64;
    limits.max_len = 12;
    Transformer model(c, limits, Device::cpu());
    model.init(4);
    const std::vector<GradientPiece> order = model.gradient_order();
    // The pieces tile [0, total) with no overlap.
    std::vector<GradientPiece> sorted = order;
    std::sort(sorted.begin(), sorted.end(), [](auto a, auto b) { return a.begin < b.begin; });
    REQUIRE(sorted.front().begin == 0);
    for (size_t i = 1; i < sorted.size(); ++i) REQUIRE(sorted[i].begin == sorted[i - 1].end);
    REQUIRE(sorted.back().end == model.layout().total());
    REQUIRE(order.size() == static_cast<size_t>(c.encoder_layers + c.decoder_layers + 1 + (c.pre_norm ? 1 : 0)));

    const HostBatch a = HostBatch::from_pairs({{5, 6, 7}, {8, 9}}, {{10, 11}, {12, 13, 14}});
    const HostBatch b = HostBatch::from_pairs({{15, 16, 17, 18}}, {{19, 20, 21}});
    Recorder rec;
    rec.model = &model;
    model.zero_grads();
    model.accumulate(a, {});
    TrainStep last;
    last.sink = &rec;
    model.accumulate(b, last);
    INFO(variant);
    REQUIRE(rec.pieces.size() == order.size());
    const std::vector<double> final_grads = test::to_f64(model.grads());
    for (size_t i = 0; i < rec.pieces.size(); ++i) {
      REQUIRE(rec.pieces[i] == static_cast<int>(i));
      const GradientPiece p = order[i];
      CHECK(std::equal(rec.values[i].begin(), rec.values[i].end(), final_grads.begin() + p.begin));
    }
  }
}
