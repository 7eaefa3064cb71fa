// The attention weights tfm-attnviz shows (libcore/viz): read from the
// model's own pass (Transformer::attention_probs), they are distributions
// over the keys a query may see (rows sum to 1, zero at padding keys and,
// in the decoder, above the diagonal), taken before attention dropout, the
// same as the incremental decoder's cross-attention step by step, and
// independent of the batch a sentence is in. Then the writers: JSON, SVG and
// the self-contained page.
#include <catch2/catch.hpp>

#include <cmath>

#include "libcore/decode/incremental.h"
#include "libcore/model/transformer.h"
#include "libcore/viz/render.h"
#include "tests/support.h"

using namespace tfm;
using Kind = Transformer::Attention;

namespace {

ModelConfig variant(int which) {
  ModelConfig c = ModelConfig::preset("tiny");
  c.parse("vocab_size = 29\nd_model = 16\nd_ff = 24\nheads = 3\nd_k = 6\nd_v = 5\nlayers = 2\nmax_positions = 24");
  c.pre_norm = which == 1;
  c.learned_positions = which == 2;
  return c;
}
const char* kVariants[] = {"post-norm", "pre-norm", "learned positions"};

const std::vector<std::vector<int32_t>> kSources = {{5, 6, 7, 8, 9}, {10, 4, 11}};
const std::vector<std::vector<int32_t>> kTargets = {{12, 13}, {14, 15, 16, 17, 18}};

// Every row of every map of the batch's last pass: a distribution over the
// keys its query may see, exactly 0 elsewhere.
void require_distributions(const Transformer& model, const HostBatch& b) {
  const int64_t H = model.config().heads;
  for (Kind kind : {Kind::encoder, Kind::decoder, Kind::cross})
    for (int64_t l = 0; l < model.config().decoder_layers; ++l) {
      const TensorView p = model.attention_probs(kind, l);
      const int64_t Tq = p.dim(2), Tk = p.dim(3);
      REQUIRE(p.dim(0) == b.batch);
      REQUIRE(Tq == (kind == Kind::encoder ? b.src_len : b.tgt_len));
      REQUIRE(Tk == (kind == Kind::decoder ? b.tgt_len : b.src_len));
      const std::vector<double> w = test::to_f64(p);
      for (int64_t s = 0; s < b.batch; ++s) {
        const int64_t nq = kind == Kind::encoder ? b.src_lengths[s] : b.tgt_lengths[s];
        const int64_t nk = kind == Kind::decoder ? b.tgt_lengths[s] : b.src_lengths[s];
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < nq; ++i) {
            double sum = 0;
            for (int64_t j = 0; j < Tk; ++j) {
              const double v = w[static_cast<size_t>(((s * H + h) * Tq + i) * Tk + j)];
              const bool hidden = j >= nk || (kind == Kind::decoder && j > i);
              INFO("kind " << static_cast<int>(kind) << " layer " << l << " sentence " << s << " head " << h
                           << " query " << i << " key " << j);
              if (hidden) REQUIRE(v == 0.0);
              else REQUIRE(v > 0.0);
              sum += v;
            }
            REQUIRE(std::abs(sum - 1.0) < 1e-12);
          }
      }
    }
}

}  // namespace

TEST_CASE("attention_probs are the pass's weights: rows sum to 1, masked keys are 0", "[attnviz]") {
  ModelLimits limits;
  limits.max_tokens = 16;
  limits.max_len = 8;
  for (int which = 0; which < 3; ++which) {
    INFO(kVariants[which]);
    Transformer model(variant(which), limits, Device::cpu(), DType::f64);
    model.init(5);
    REQUIRE_THROWS_WITH(model.attention_probs(Kind::encoder, 0), Catch::Contains("no model pass has run"));
    const HostBatch b = HostBatch::from_pairs(kSources, kTargets);
    model.evaluate(b);
    require_distributions(model, b);
    REQUIRE_THROWS_WITH(model.attention_probs(Kind::cross, 2), Catch::Contains("outside the 2 layers of the model's decoder"));
  }
}

TEST_CASE("attention_probs are taken before attention dropout", "[attnviz]") {
  ModelConfig c = variant(0);
  c.attention_dropout = 0.5f;
  ModelLimits limits;
  limits.max_tokens = 16;
  limits.max_len = 8;
  Transformer model(c, limits, Device::cpu(), DType::f64);
  model.init(6);
  const HostBatch b = HostBatch::from_pairs(kSources, kTargets);
  TrainStep step;  // dropout on: the weights the values see are dropped and rescaled
  step.rng_step = 3;
  model.forward_backward(b, step);
  require_distributions(model, b);
}

TEST_CASE("the pass's cross-attention is the incremental decoder's, step by step", "[attnviz]") {
  for (int which = 0; which < 3; ++which) {
    INFO(kVariants[which]);
    const ModelConfig c = variant(which);
    ModelLimits limits;
    limits.max_tokens = 8;
    limits.max_len = 8;
    Transformer model(c, limits, Device::cpu(), DType::f64);
    model.init(7);
    const std::vector<int32_t>& src = kSources[0];
    const std::vector<int32_t> tgt = {12, 20, 7, 5};
    model.evaluate(HostBatch::from_pairs({src}, {tgt}));
    viz::SentenceAttention pass;
    viz::read_attention(model, 0, static_cast<int64_t>(src.size()), static_cast<int64_t>(tgt.size()) + 1, pass);
    const int64_t S = static_cast<int64_t>(src.size()), H = c.heads;
    for (int64_t layer = 0; layer < c.decoder_layers; ++layer) {
      IncrementalDecoder dec(model, {.sentences = 1, .src_tokens = S, .src_len = S, .rows = 1,
                                     .steps = 5, .attention_layer = static_cast<int>(layer)});
      dec.start({src}, 1, 5);
      double worst = 0;
      for (int64_t t = 0; t <= static_cast<int64_t>(tgt.size()); ++t) {
        dec.step({{0, 0, t == 0 ? kBosId : tgt[static_cast<size_t>(t - 1)]}});
        const std::vector<double> got = test::to_f64(dec.attention());  // (1, H, S)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t j = 0; j < S; ++j)
            worst = std::max(worst, std::abs(got[static_cast<size_t>(h * S + j)] -
                                              pass.map(viz::Stack::cross, layer, h)[t * S + j]));
      }
      INFO("layer " << layer << ": worst difference " << worst);
      CHECK(worst < 1e-6);  // the pass's weights pass through f32 on their way out
    }
  }
}

TEST_CASE("a sentence's weights do not depend on its batch", "[attnviz]") {
  ModelLimits limits;
  limits.max_tokens = 16;
  limits.max_len = 8;
  Transformer model(variant(0), limits, Device::cpu(), DType::f64);
  model.init(8);
  model.evaluate(HostBatch::from_pairs(kSources, kTargets));
  viz::SentenceAttention batched;
  viz::read_attention(model, 1, 3, 6, batched);
  model.evaluate(HostBatch::from_pairs({kSources[1]}, {kTargets[1]}));
  viz::SentenceAttention alone;
  viz::read_attention(model, 0, 3, 6, alone);
  REQUIRE(batched.enc.size() == static_cast<size_t>(2 * 3 * 3 * 3));
  REQUIRE(batched.dec.size() == static_cast<size_t>(2 * 3 * 6 * 6));
  REQUIRE(batched.cross.size() == static_cast<size_t>(2 * 3 * 6 * 3));
  for (const auto& [a, b] : {std::pair(&batched.enc, &alone.enc), std::pair(&batched.dec, &alone.dec),
                             std::pair(&batched.cross, &alone.cross)})
    for (size_t i = 0; i < a->size(); ++i) REQUIRE(std::abs((*a)[i] - (*b)[i]) < 1e-6f);
}

TEST_CASE("the writers: JSON, SVG and a page that loads nothing", "[attnviz]") {
  viz::SentenceAttention s;
  s.source = {"\xe2\x96\x81" "a<b", "c"};
  s.target = {"x", "</s>"};
  s.target_in = {"<s>", "x"};
  s.layers = 1;
  s.heads = 2;
  s.enc = {0.25f, 0.75f, 1, 0, /*head 2*/ 0.5f, 0.5f, 0, 1};
  s.dec = {1, 0, 0.5f, 0.5f, /*head 2*/ 1, 0, 0.125f, 0.875f};
  s.cross = {0.1f, 0.9f, 0.2f, 0.8f, /*head 2*/ 0.3f, 0.7f, 0.4f, 0.6f};
  const std::string json = viz::attention_json(s);
  CHECK_THAT(json, Catch::StartsWith("{\"source\":[\"\xe2\x96\x81" "a<b\",\"c\"],\"target\":[\"x\",\"</s>\"]"));
  CHECK_THAT(json, Catch::Contains("\"layers\":1,\"heads\":2"));
  CHECK_THAT(json, Catch::Contains("\"enc\":[[[[0.25,0.75],[1,0]],[[0.5,0.5],[0,1]]]]"));
  CHECK_THAT(json, Catch::Contains("\"dec\":[[[[1,0],[0.5,0.5]],[[1,0],[0.125,0.875]]]]"));
  CHECK_THAT(json, Catch::EndsWith("\"cross\":[[[[0.1,0.9],[0.2,0.8]],[[0.3,0.7],[0.4,0.6]]]]}"));

  viz::View v;
  v.stack = viz::Stack::cross;
  v.heads = {1};
  const std::string svg = viz::attention_svg(s, v);
  CHECK_THAT(svg, Catch::Contains("encoder-decoder attention, layer 1, head 2<"));
  CHECK_THAT(svg, Catch::Contains("&lt;/s&gt;"));
  CHECK_THAT(svg, Catch::Contains("a&lt;b"));
  CHECK_THAT(svg, Catch::Contains("stroke-opacity=\"0.7\""));
  CHECK_THAT(svg, !Catch::Contains("stroke-opacity=\"0.1\""));  // head 1's weight
  size_t lines = 0;
  for (size_t at = svg.find("<line"); at != std::string::npos; at = svg.find("<line", at + 1)) ++lines;
  CHECK(lines == 4);

  const std::string page = viz::attention_page({s, s}, v, "m<1>.bin");
  CHECK_THAT(page, Catch::Contains("<title>m&lt;1&gt;.bin - tfm-attnviz</title>"));
  CHECK_THAT(page, !Catch::Contains("__TFM_"));
  CHECK_THAT(page, !Catch::Contains("</s>"));  // inside the data every '<' is escaped
  CHECK_THAT(page, Catch::Contains("\\u003c/s>"));
  // No address but the SVG namespace's name (a name, never fetched).
  std::string addresses = page;
  for (size_t at; (at = addresses.find("http://www.w3.org/2000/svg")) != std::string::npos;) addresses.erase(at, 26);
  for (const char* outside : {"http:", "https:", "src=", "href=", "@import", "url("}) {
    INFO(outside);
    CHECK_THAT(addresses, !Catch::Contains(outside));
  }

  v.layer = 1;
  CHECK_THAT(test::error_of([&] { viz::check_view(v, 1, 2, 1); }), Catch::Contains("--layer 2: the model has layers 1 to 1"));
  v.layer = 0;
  v.heads = {2};
  CHECK_THAT(test::error_of([&] { viz::attention_svg(s, v); }), Catch::Contains("head 3 is not one of the model's heads 1 to 2"));
  CHECK_THAT(test::error_of([] { viz::parse_stack("encoder"); }), Catch::Contains("enc, dec or cross"));
}
