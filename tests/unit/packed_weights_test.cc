// The weights packed for the CPU's fp32 decoder (model/packed.h): every
// multiplied matrix found as its panels, the attention's q, k and v as one
// run of them, a view that starts mid-panel not found (its GEMM packs it
// itself); the panels hold the weights' own values; a packed model does not
// train. That the decoder's outputs keep their bits: batch_invariance_test.
#include <catch2/catch.hpp>

#include <cstring>

#include "kernels/ops.h"
#include "libcore/model/int8.h"
#include "libcore/model/layers.h"
#include "libcore/model/packed.h"
#include "libcore/model/transformer.h"
#include "tests/support.h"

using namespace tfm;

TEST_CASE("packed weights: every multiplied matrix as panels, groups as one run", "[model]") {
  ModelLimits limits;
  limits.max_tokens = 32;
  limits.max_len = 8;
  ModelConfig c = ModelConfig::preset("tiny");
  c.parse("vocab_size = 40\nd_model = 32\nd_ff = 48\nheads = 2\nmax_positions = 16");
  Transformer model(c, limits, Device::cpu());
  model.init(3);
  model.pack_weights();
  const model::PackedWeights* packed = model.packed_weights();
  REQUIRE(packed != nullptr);
  CHECK(model.memory_report().find("packed weights") != std::string::npos);
  const ParamLayout& l = model.layout();
  const TensorView params = model.params();
  // Panel p of a matrix holds its rows 16p..16p+15, element (q, k) at [k * 16 + q].
  const auto check_panels = [](const TensorView& w, const float* panels) {
    REQUIRE(panels != nullptr);
    const float* v = static_cast<const float*>(w.data());
    const int64_t rows = w.dim(0), cols = w.dim(1);
    for (int64_t j = 0; j < rows; ++j)
      for (int64_t k = 0; k < cols; ++k)
        CHECK(panels[(j / 16) * 16 * cols + k * 16 + j % 16] == v[j * cols + k]);
  };
  for (int id = 0; id < static_cast<int>(l.entries().size()); ++id) {
    INFO(l.entry(id).name);
    if (l.multiplied(id))
      check_panels(l.view(params, id), packed->find(l.view(params, id)));
    else
      CHECK(packed->find(l.view(params, id)) == nullptr);
  }
  const AttentionIds& self = l.decoder[0].self_attn;
  check_panels(l.view(params, self.q.weight, self.v.weight), packed->find(l.view(params, self.q.weight, self.v.weight)));
  const AttentionIds& cross = l.decoder[0].cross_attn;
  check_panels(l.view(params, cross.k.weight, cross.v.weight),
               packed->find(l.view(params, cross.k.weight, cross.v.weight)));
  // Rows 8.. of the target embedding start mid-panel; rows 16.. do not.
  const TensorView E = l.view(params, l.tgt_embed);
  CHECK(packed->find(model::rows(E, 8, 16)) == nullptr);
  check_panels(model::rows(E, 16, 16), packed->find(model::rows(E, 16, 16)));
  CHECK(packed->find(Tensor({4, 32}, DType::f32).view()) == nullptr);  // not the model's

  HostBatch batch = HostBatch::from_pairs({{5, 6, 7}}, {{8, 9}});
  CHECK_THROWS_WITH(model.forward_backward(batch, TrainStep{}), Catch::Contains("does not train"));
}

TEST_CASE("packed int8 weights: every quantized matrix as panels of its rows, groups as one run", "[model][int8]") {
  ModelConfig c = ModelConfig::preset("tiny");
  c.parse("vocab_size = 40\nd_model = 32\nd_ff = 48\nheads = 2\nmax_positions = 16");
  ModelWeights model(c, Device::cpu(), DType::f32);
  model.init(4);
  model.quantize_int8();
  const model::Int8Weights& int8 = *model.int8_weights();
  const ParamLayout& l = model.layout();
  const TensorView params = model.params();
  const TensorView E = l.view(params, l.tgt_embed);
  CHECK(int8.find(E).panels == nullptr);  // before pack_weights
  model.pack_weights();
  CHECK(model.packed_weights() == nullptr);  // int8's panels only
  CHECK(model.memory_report().find("packed weights") != std::string::npos);
  // Panel p holds rows 16p..16p+15, four bytes at group g of row q at [g * 16 + q].
  const auto check_panels = [](const ops::Int8Matrix& m) {
    REQUIRE(m.panels != nullptr);
    const int64_t groups = m.ld / 4;
    for (int64_t j = 0; j < m.rows; ++j)
      for (int64_t g = 0; g < groups; ++g) {
        int32_t four;
        std::memcpy(&four, m.values + j * m.ld + 4 * g, sizeof four);
        CHECK(m.panels[(j / 16) * 16 * groups + g * 16 + j % 16] == four);
      }
  };
  for (int id = 0; id < static_cast<int>(l.entries().size()); ++id) {
    INFO(l.entry(id).name);
    if (l.multiplied(id)) check_panels(int8.find(l.view(params, id)));
  }
  const AttentionIds& self = l.decoder[0].self_attn;
  check_panels(int8.find(l.view(params, self.q.weight, self.v.weight)));
  const AttentionIds& cross = l.decoder[0].cross_attn;
  check_panels(int8.find(l.view(params, cross.k.weight, cross.v.weight)));
  // Rows 8.. of the target embedding start mid-panel (gemm_int8 packs them
  // itself); rows 16.. do not.
  CHECK(int8.find(model::rows(E, 8, 16)).panels == nullptr);
  check_panels(int8.find(model::rows(E, 16, 16)));
}
