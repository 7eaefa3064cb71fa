#include "libcore/model/params.h"

#include <cmath>

#include "kernels/ops.h"

namespace tfm {

ParamLayout::ParamLayout(const ModelConfig& c) {
  const int64_t D = c.d_model;
  if (c.share_embeddings) {
    src_embed = tgt_embed = add("embed.weight", {c.vocab_size, D});
  } else {
    src_embed = add("encoder.embed_tokens.weight", {c.vocab_size, D});
    tgt_embed = add("decoder.embed_tokens.weight", {c.vocab_size, D});
  }
  if (c.learned_positions) {
    src_pos = add("encoder.embed_positions.weight", {c.max_positions, D});
    tgt_pos = add("decoder.embed_positions.weight", {c.max_positions, D});
  }
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = fmt::format("encoder.layers.{}.", l);
    EncoderLayerIds e;
    e.self_attn = attention(p + "self_attn.", c);
    e.self_attn_norm = norm(p + "self_attn_layer_norm.", D);
    e.ffn = {linear(p + "fc1.", c.d_ff, D), linear(p + "fc2.", D, c.d_ff)};
    e.ffn_norm = norm(p + "final_layer_norm.", D);
    encoder.push_back(e);
  }
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = fmt::format("decoder.layers.{}.", l);
    DecoderLayerIds d;
    d.self_attn = attention(p + "self_attn.", c);
    d.self_attn_norm = norm(p + "self_attn_layer_norm.", D);
    d.cross_attn = attention(p + "encoder_attn.", c);
    d.cross_attn_norm = norm(p + "encoder_attn_layer_norm.", D);
    d.ffn = {linear(p + "fc1.", c.d_ff, D), linear(p + "fc2.", D, c.d_ff)};
    d.ffn_norm = norm(p + "final_layer_norm.", D);
    decoder.push_back(d);
  }
  if (c.pre_norm) {
    encoder_norm = norm("encoder.layer_norm.", D);
    decoder_norm = norm("decoder.layer_norm.", D);
  }
}

int ParamLayout::add(std::string name, Shape shape, bool group_with_next) {
  entries_.push_back({std::move(name), shape, total_});
  total_ += shape.numel();
  if (!group_with_next) total_ = (total_ + kAlign - 1) / kAlign * kAlign;
  return static_cast<int>(entries_.size()) - 1;
}

LinearIds ParamLayout::linear(const std::string& prefix, int64_t out, int64_t in) {
  return {add(prefix + "weight", {out, in}), add(prefix + "bias", {out})};
}

NormIds ParamLayout::norm(const std::string& prefix, int64_t d) {
  return {add(prefix + "weight", {d}), add(prefix + "bias", {d})};
}

// The q, k and v weights lie side by side, and so do their biases: one GEMM
// projects all three in self-attention, and k and v in the decoder's
// attention over the source.
AttentionIds ParamLayout::attention(const std::string& prefix, const ModelConfig& c) {
  const int64_t D = c.d_model, HK = c.heads * c.d_k, HE = c.heads * c.d_v;
  AttentionIds a;
  a.q.weight = add(prefix + "q_proj.weight", {HK, D}, true);
  a.k.weight = add(prefix + "k_proj.weight", {HK, D}, true);
  a.v.weight = add(prefix + "v_proj.weight", {HE, D});
  a.q.bias = add(prefix + "q_proj.bias", {HK}, true);
  a.k.bias = add(prefix + "k_proj.bias", {HK}, true);
  a.v.bias = add(prefix + "v_proj.bias", {HE});
  a.out = linear(prefix + "out_proj.", D, HE);
  return a;
}

int ParamLayout::find(std::string_view name) const {
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].name == name) return static_cast<int>(i);
  return -1;
}

int64_t ParamLayout::count() const {
  int64_t n = 0;
  for (const ParamEntry& e : entries_) n += e.shape.numel();
  return n;
}

bool ParamLayout::multiplied(int id) const {
  const bool looked_up = id == src_pos || id == tgt_pos || (id == src_embed && id != tgt_embed);
  return entry(id).shape.rank() == 2 && !looked_up;
}

TensorView ParamLayout::view(const TensorView& flat, int id) const {
  const ParamEntry& e = entry(id);
  auto* base = static_cast<char*>(flat.data()) + e.offset * static_cast<int64_t>(dtype_size(flat.dtype()));
  return TensorView(base, flat.dtype(), e.shape, flat.device());
}

TensorView ParamLayout::view(const TensorView& flat, int first, int last) const {
  const Shape& s = entry(first).shape;
  int64_t lead = 0;
  for (int id = first; id <= last; ++id) {
    const ParamEntry& e = entry(id);
    TFM_REQUIRE((s.rank() == 1 || s.rank() == 2) && e.shape.rank() == s.rank() &&
                    (s.rank() == 1 || e.shape[1] == s[1]) &&
                    e.offset == entry(first).offset + lead * (s.rank() == 1 ? 1 : s[1]),
                "internal: parameters {}..{} are not one group", entry(first).name, entry(last).name);
    lead += e.shape[0];
  }
  const Shape joined = s.rank() == 1 ? Shape{lead} : Shape{lead, s[1]};
  auto* base = static_cast<char*>(flat.data()) + entry(first).offset * static_cast<int64_t>(dtype_size(flat.dtype()));
  return TensorView(base, flat.dtype(), joined, flat.device());
}

void init_parameters(const ParamLayout& layout, const ModelConfig& c, const TensorView& flat,
                     uint64_t seed, const Stream& stream) {
  device_memset_zero(flat.data(), flat.device(), flat.bytes(), stream);
  for (size_t id = 0; id < layout.entries().size(); ++id) {
    const ParamEntry& e = layout.entries()[id];
    const TensorView t = layout.view(flat, static_cast<int>(id));
    const RngKey key{seed, static_cast<uint32_t>(id), 0};
    const bool is_bias = e.name.ends_with(".bias");
    const bool is_norm = e.name.find("layer_norm.") != std::string::npos;
    if (is_norm && e.name.ends_with(".weight")) {
      ops::uniform(t, key, 1.0f, 1.0f, stream);  // gain 1
    } else if (is_bias) {
      continue;  // zeros
    } else if (e.shape.rank() == 2 && e.name.find("embed") != std::string::npos) {
      // std D^-1/2: uniform on [-a, a] has std a / sqrt(3).
      const float a = static_cast<float>(std::sqrt(3.0 / static_cast<double>(c.d_model)));
      ops::uniform(t, key, -a, a, stream);
    } else {
      // Xavier uniform: a = sqrt(6 / (fan_in + fan_out)).
      const float a = static_cast<float>(std::sqrt(6.0 / static_cast<double>(e.shape[0] + e.shape[1])));
      ops::uniform(t, key, -a, a, stream);
    }
  }
}

Tensor sinusoid_table(int64_t positions, int64_t d_model, DType dtype) {
  Tensor t({positions, d_model}, dtype);
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < d_model; i += 2) {
      const double angle = static_cast<double>(p) / std::pow(10000.0, static_cast<double>(i) / static_cast<double>(d_model));
      const double s = std::sin(angle), co = std::cos(angle);
      if (dtype == DType::f64) {
        t.data_as<double>()[p * d_model + i] = s;
        if (i + 1 < d_model) t.data_as<double>()[p * d_model + i + 1] = co;
      } else {
        t.data_as<float>()[p * d_model + i] = static_cast<float>(s);
        if (i + 1 < d_model) t.data_as<float>()[p * d_model + i + 1] = static_cast<float>(co);
      }
    }
  return t;
}

}  // namespace tfm
