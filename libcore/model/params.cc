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
  for (int64_t l = 0; l < c.encoder_layers; ++l) {
    const std::string p = fmt::format("encoder.layers.{}.", l);
    EncoderLayerIds e;
    e.self_attn = attention(p + "self_attn.", c);
    e.self_attn_norm = norm(p + "self_attn_layer_norm.", D);
    e.ffn = {linear(p + "fc1.", c.d_ff, D), linear(p + "fc2.", D, c.d_ff)};
    e.ffn_norm = norm(p + "final_layer_norm.", D);
    encoder.push_back(e);
  }
  for (int64_t l = 0; l < c.decoder_layers; ++l) {
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
  // Last, after everything tfm's own models have: their layout is unchanged.
  out_proj = c.tie_output ? tgt_embed : add("decoder.output_projection.weight", {c.vocab_size, D});
  if (c.output_bias) out_bias = add("decoder.output_bias", {c.vocab_size});
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
  const bool looked_up = id == src_pos || id == tgt_pos || ((id == src_embed || id == tgt_embed) && id != out_proj);
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
    const bool is_bias = e.name.ends_with(".bias") || static_cast<int>(id) == layout.out_bias;
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

Tensor sinusoid_table(int64_t positions, int64_t d_model, DType dtype, PositionLayout layout, int64_t offset) {
  Tensor t({positions, d_model}, dtype);
  const auto put = [&](int64_t p, int64_t col, double v) {
    if (dtype == DType::f64)
      t.data_as<double>()[p * d_model + col] = v;
    else
      t.data_as<float>()[p * d_model + col] = static_cast<float>(v);
  };
  const int64_t half = d_model / 2;
  for (int64_t p = 0; p < positions; ++p) {
    const auto at = static_cast<double>(p + offset);
    for (int64_t i = 0; i < half; ++i) {
      const bool interleaved = layout == PositionLayout::interleaved;
      if (layout == PositionLayout::fairseq) {
        // In f32 throughout, as fairseq computes its table (in double the
        // angles of late positions would differ by more than f32's rounding).
        const float step = static_cast<float>(std::log(10000.0) / static_cast<double>(half - 1));
        const float angle = static_cast<float>(p + offset) * std::exp(static_cast<float>(i) * -step);
        put(p, i, std::sin(angle));
        put(p, half + i, std::cos(angle));
        continue;
      }
      const double angle = at / std::pow(10000.0, static_cast<double>(2 * i) / static_cast<double>(d_model));
      put(p, interleaved ? 2 * i : i, std::sin(angle));
      put(p, interleaved ? 2 * i + 1 : half + i, std::cos(angle));
    }
  }
  return t;
}

Tensor sinusoid_table(const ModelConfig& config, int64_t positions, DType dtype) {
  return sinusoid_table(positions, config.d_model, dtype, config.position_layout, config.position_offset);
}

float embedding_scale(const ModelConfig& config) {
  return config.scale_embeddings ? static_cast<float>(std::sqrt(static_cast<double>(config.d_model))) : 1.0f;
}

}  // namespace tfm
