// Runs tfm's Transformer once, in f32 on the CPU, for model_vs_pytorch.py,
// which rebuilds the same model from PyTorch's own layers.
//
//   model_fixture OUT_DIR VARIANT      VARIANT: tiny | row-b | tiny-pre
//
//   tiny      ModelConfig::preset("tiny"): D 32, H 4, K = E = 8 = D / H
//   row-b     Table 3 row B: base with d_k 16 (so H * K != D, d_v 64), and a
//             vocabulary of 1000 to keep the files small
//   tiny-pre  tiny with pre-norm, learned positions and separate source and
//             target embeddings (the options the paper's default leaves off)
//   marian    tiny as Marian / Hugging Face Marian models are: SiLU, sines and
//             cosines in halves, a bias on the logits, sources ending in eos,
//             the decoder starting from <pad> (id V - 1), eos 0, 3 encoder
//             and 2 decoder layers, layer-norm epsilon 1e-6
//   fairseq   tiny as fairseq's Transformers are: GELU, fairseq's sinusoids
//             from position 2, no embedding scale, separate embeddings and
//             an untied output projection, sources ending in eos, the decoder
//             starting from eos, pre-norm, 1 encoder and 2 decoder layers
//
// Writes OUT_DIR/params.bin (save_model: the parameters the Python side
// loads) and OUT_DIR/results.bin (io::write_checkpoint, no tokenizer):
//   log_probs        f32 (B * T, V)   Transformer::log_probs
//   loss, nll        f64 (1)          LossSums of forward_backward
//   grad.<param>     f32 <its shape>  d loss / d param, grad_scale 1, no dropout
//   src, tgt_in, tgt_out  i32 (B, S), (B, T), (B, T);  src_lengths, tgt_lengths  i32 (B)
//
// After init(seed) every bias and layer-norm parameter is moved off its
// initial 0 or 1 by a seeded uniform draw: with all biases zero and every
// layer norm the identity, a bias added in the wrong place or a gain read
// from the wrong tensor would go unseen.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "libcore/base/error.h"
#include "libcore/io/checkpoint.h"
#include "libcore/model/batch.h"
#include "libcore/model/model_io.h"
#include "libcore/model/transformer.h"

using namespace tfm;

namespace {

ModelConfig variant_config(const std::string& variant) {
  if (variant == "tiny") return ModelConfig::preset("tiny");
  if (variant == "row-b") {
    ModelConfig c = ModelConfig::preset("base");
    c.d_k = 16;  // d_v stays 64: Table 3 row B changes d_k alone
    c.vocab_size = 1000;
    return c;
  }
  if (variant == "tiny-pre") {
    ModelConfig c = ModelConfig::preset("tiny");
    c.pre_norm = true;
    c.learned_positions = true;
    c.share_embeddings = false;
    return c;
  }
  if (variant == "marian") {
    ModelConfig c = ModelConfig::preset("tiny");
    c.activation = ops::Activation::silu;
    c.position_layout = PositionLayout::halves;
    c.output_bias = true;
    c.source_eos = true;
    c.decoder_start_id = c.vocab_size - 1;
    c.eos_id = 0;
    c.encoder_layers = 3;
    c.layer_norm_eps = 1e-6f;
    return c;
  }
  if (variant == "fairseq") {
    ModelConfig c = ModelConfig::preset("tiny");
    c.activation = ops::Activation::gelu;
    c.position_layout = PositionLayout::fairseq;
    c.position_offset = 2;
    c.scale_embeddings = false;
    c.share_embeddings = false;
    c.tie_output = false;
    c.source_eos = true;
    c.decoder_start_id = c.eos_id;
    c.pre_norm = true;
    c.encoder_layers = 1;
    return c;
  }
  fail("unknown variant '{}': expected tiny, row-b, tiny-pre, marian or fairseq", variant);
}

// Three pairs of different lengths, so that both sides have padding and the
// longest source and the longest target belong to different sentences.
// Ids avoid the reserved 0..3 (pad, unk, bos, eos) and the model's own
// start and end ids; the model frames them.
HostBatch fixed_batch(const ModelConfig& c) {
  const int64_t vocab = c.vocab_size - 1;  // the marian variant starts from V - 1
  std::mt19937 gen(1234);
  std::uniform_int_distribution<int32_t> id(4, static_cast<int32_t>(vocab) - 1);
  const auto sentence = [&](int n) {
    std::vector<int32_t> s(static_cast<size_t>(n));
    for (int32_t& x : s) x = id(gen);
    return s;
  };
  return HostBatch::from_pairs({sentence(7), sentence(4), sentence(5)},
                               {sentence(5), sentence(8), sentence(3)}, Framing::of(c));
}

// Biases and layer-norm gains and biases off their initial values (see top).
void perturb(Transformer& model) {
  std::mt19937 gen(99);
  std::uniform_real_distribution<float> u(-0.2f, 0.2f);
  const ParamLayout& layout = model.layout();
  for (size_t id = 0; id < layout.entries().size(); ++id) {
    const ParamEntry& e = layout.entries()[id];
    const bool is_norm = e.name.find("layer_norm.") != std::string::npos;
    if (!is_norm && !e.name.ends_with(".bias") && static_cast<int>(id) != layout.out_bias) continue;
    const TensorView t = model.param(static_cast<int>(id));
    float* p = t.data_as<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] += u(gen);
  }
}

TensorView i32_view(const std::vector<int32_t>& v, Shape shape) {
  return TensorView(const_cast<int32_t*>(v.data()), DType::i32, shape);
}

void run(const std::string& out_dir, const std::string& variant) {
  const ModelConfig config = variant_config(variant);
  ModelLimits limits;
  limits.max_tokens = 64;
  limits.max_len = 16;
  limits.loss_chunk = 8;  // several chunks: the chunked output layer is covered too
  Transformer model(config, limits, Device::cpu());
  model.init(7);
  perturb(model);
  save_model(out_dir + "/params.bin", model);

  const HostBatch batch = fixed_batch(config);
  model.zero_grads();
  TrainStep step;
  step.dropout = false;
  const LossSums sums = model.forward_backward(batch, step);
  const Tensor log_probs = model.log_probs(batch);

  double loss = sums.loss, nll = sums.nll;
  const int64_t B = batch.batch, S = batch.src_len, T = batch.tgt_len;
  std::vector<io::NamedTensor> tensors = {
      {"log_probs", log_probs.view()},
      {"loss", TensorView(&loss, DType::f64, {1})},
      {"nll", TensorView(&nll, DType::f64, {1})},
      {"src", i32_view(batch.src, {B, S})},
      {"src_lengths", i32_view(batch.src_lengths, {B})},
      {"tgt_in", i32_view(batch.tgt_in, {B, T})},
      {"tgt_out", i32_view(batch.tgt_out, {B, T})},
      {"tgt_lengths", i32_view(batch.tgt_lengths, {B})},
  };
  const ParamLayout& layout = model.layout();
  for (size_t id = 0; id < layout.entries().size(); ++id)
    tensors.push_back({"grad." + layout.entries()[id].name, model.grad(static_cast<int>(id))});
  io::write_checkpoint(out_dir + "/results.bin", config.to_text(), std::string_view(),
                       std::span<const io::NamedTensor>(tensors));
  std::printf("model_fixture: %s: B %lld, S %lld, T %lld, loss %.6f, nll %.6f, %zu gradients\n",
              variant.c_str(), static_cast<long long>(B), static_cast<long long>(S),
              static_cast<long long>(T), loss, nll, layout.entries().size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: model_fixture OUT_DIR tiny|row-b|tiny-pre|marian|fairseq\n");
    return 2;
  }
  try {
    run(argv[1], argv[2]);
  } catch (const Error& e) {
    std::fprintf(stderr, "model_fixture: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
