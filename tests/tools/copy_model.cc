#include "tests/tools/copy_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "libcore/base/error.h"
#include "libcore/model/params.h"

namespace tfm {
namespace {

constexpr float kQuiet = 1e-4f;    // what is left of a quiet sub-layer's output projection
constexpr double kScoreGap = 30;   // nats between a query's own source position and any other
constexpr float kCopyGain = 4;     // the copied embedding's weight against the decoder input's
constexpr double kShared = 0.5;    // the direction all embeddings share (eos's negated), before norming

void scale(const TensorView& v, float by) {
  float* p = v.data_as<float>();
  std::transform(p, p + v.numel(), p, [by](float x) { return x * by; });
}

}  // namespace

void make_copy_model(ModelWeights& model, uint64_t seed) {
  const ModelConfig& c = model.config();
  TFM_REQUIRE(!c.pre_norm && c.share_embeddings && c.tie_output && c.learned_positions && !c.output_bias &&
                  c.scale_embeddings && c.source_eos,
              "a copying model is post-norm, with tied embeddings scaled by sqrt(d_model), learned positions, no "
              "output bias and sources ending in eos");
  const int64_t D = c.d_model, H = c.heads, K = c.d_k, V = c.vocab_size;
  TFM_REQUIRE(c.d_v == K && H * K == D && H >= 2,
              "a copying model needs d_k = d_v and heads x d_k = d_model, 2 heads or more");
  TFM_REQUIRE(model.device().is_cpu() && model.param_dtype() == DType::f32,
              "a copying model is made in f32 on the CPU");
  const ParamLayout& L = model.layout();

  // The position dimensions: the first d_k; the token dimensions: the rest.
  std::vector<int64_t> positions, tokens;
  for (int64_t d = 0; d < D; ++d) (d < K ? positions : tokens).push_back(d);

  // Embeddings: unit vectors in the token dimensions, summing to zero (a
  // layer norm's mean is then the position's, which sums to zero too).
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  const auto unit = [&](std::vector<double>& v) {
    double mean = 0, norm = 0;
    for (int64_t d : tokens) mean += v[static_cast<size_t>(d)];
    mean /= static_cast<double>(tokens.size());
    for (int64_t d : tokens) v[static_cast<size_t>(d)] -= mean;
    for (int64_t d : tokens) norm += v[static_cast<size_t>(d)] * v[static_cast<size_t>(d)];
    for (int64_t d : tokens) v[static_cast<size_t>(d)] /= std::sqrt(norm);
  };
  std::vector<double> shared(static_cast<size_t>(D), 0.0), row(static_cast<size_t>(D), 0.0);
  for (int64_t d : tokens) shared[static_cast<size_t>(d)] = normal(rng);
  unit(shared);
  float* embed = model.param(L.tgt_embed).data_as<float>();
  for (int64_t v = 0; v < V; ++v) {
    const double sign = v == c.eos_id ? -1 : 1;
    for (int64_t d : tokens)
      row[static_cast<size_t>(d)] = normal(rng) + sign * kShared * shared[static_cast<size_t>(d)];
    unit(row);
    for (int64_t d = 0; d < D; ++d) embed[v * D + d] = static_cast<float>(row[static_cast<size_t>(d)]);
  }

  // Quiet sub-layers: every output projection but the first decoder
  // layer's cross-attention's (biases are zero from init()).
  for (const EncoderLayerIds& e : L.encoder) {
    scale(model.param(e.self_attn.out.weight), kQuiet);
    scale(model.param(e.ffn.fc2.weight), kQuiet);
  }
  for (size_t l = 0; l < L.decoder.size(); ++l) {
    const DecoderLayerIds& d = L.decoder[l];
    scale(model.param(d.self_attn.out.weight), kQuiet);
    scale(model.param(d.ffn.fc2.weight), kQuiet);
    if (l > 0) scale(model.param(d.cross_attn.out.weight), kQuiet);
  }

  // Positions: a random unit code each in the position dimensions, summing
  // to zero (so that a layer norm's mean is 0: nothing of a position
  // reaches the token dimensions), scaled to sqrt(D / 2), the paper's
  // sinusoids' norm; the same table for the encoder and the decoder.
  const int64_t T = c.max_positions;
  std::vector<double> code(static_cast<size_t>(T * K));
  for (double& x : code) x = normal(rng);
  for (int64_t t = 0; t < T; ++t) {
    double* a = code.data() + t * K;
    double mean = 0, norm = 0;
    for (int64_t j = 0; j < K; ++j) mean += a[j] / static_cast<double>(K);
    for (int64_t j = 0; j < K; ++j) norm += (a[j] - mean) * (a[j] - mean);
    for (int64_t j = 0; j < K; ++j) a[j] = (a[j] - mean) / std::sqrt(norm);
  }
  const double rho = std::sqrt(static_cast<double>(D) / 2);
  for (int id : {L.src_pos, L.tgt_pos}) {
    const TensorView table = model.param(id);
    float* p = table.data_as<float>();
    std::fill_n(p, table.numel(), 0.0f);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < K; ++j)
        p[t * D + positions[static_cast<size_t>(j)]] = static_cast<float>(rho * code[static_cast<size_t>(t * K + j)]);
  }

  // The query's gain: the least margin of a code over any other's (1 - the
  // largest cosine), in the layer norm's units (an input's variance is 1
  // from the embedding and rho^2 / D = 1/2 from its position).
  double gap = std::numeric_limits<double>::infinity();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t s = t + 1; s < T; ++s) {
      double dot = 0;
      for (int64_t j = 0; j < K; ++j)
        dot += code[static_cast<size_t>(t * K + j)] * code[static_cast<size_t>(s * K + j)];
      gap = std::min(gap, 1 - dot);
    }
  TFM_REQUIRE(gap > 0.1, "{} positions' codes of d_k = {} are too alike to tell apart", T, K);
  const double variance = 1 + rho * rho / static_cast<double>(D);
  const double gain = kScoreGap * variance * std::sqrt(static_cast<double>(K)) / (rho * rho * gap);

  // The first decoder layer's cross-attention.
  const AttentionIds& x = L.decoder.front().cross_attn;
  const TensorView q = model.param(x.q.weight), k = model.param(x.k.weight), v = model.param(x.v.weight),
                   out = model.param(x.out.weight);
  for (const TensorView& w : {q, k, v, out}) scale(w, kQuiet);  // no row or column all zero (int8's scales)
  float *pq = q.data_as<float>(), *pk = k.data_as<float>(), *pv = v.data_as<float>(), *po = out.data_as<float>();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = 0; j < K; ++j) {
      const int64_t r = h * K + j;
      pq[r * D + positions[static_cast<size_t>(j)]] += static_cast<float>(gain);  // code j of the position
      pk[r * D + positions[static_cast<size_t>(j)]] += 1.0f;
      if (h == 0) continue;  // head 0's value stays quiet
      const int64_t d = tokens[static_cast<size_t>((h - 1) * K + j)];
      pv[r * D + d] += 1.0f;
      po[d * D + r] += kCopyGain;  // out is (D, H x d_v)
    }
}

}  // namespace tfm
