// The whole model on CUDA against the whole model on the CPU: one training
// step (forward, backward, Adam) in fp32 from the same Philox
// initialization, with dropout on (the masks are the same on both devices).
// The incremental decoder's log-probabilities: decode_test.cc.
#include <catch2/catch.hpp>

#include <cmath>
#include <utility>

#include "libcore/model/transformer.h"
#include "libcore/train/optimizer.h"
#include "tests/support.h"

using namespace tfm;

namespace {

// pre_norm, and a configuration of the variants (config.h): 1 as Marian's
// models are, 2 as fairseq's; 0 none.
ModelConfig config_for(bool pre_norm, int variants = 0) {
  ModelConfig c = ModelConfig::preset("tiny");
  c.vocab_size = 97;
  c.d_model = 48;
  c.d_ff = 80;
  c.heads = 3;
  c.d_k = 20;
  c.d_v = 12;
  c.attention_dropout = 0.1f;
  c.pre_norm = pre_norm;
  if (variants == 1)
    c.parse("activation = silu\nposition_layout = halves\noutput_bias = true\nsource_eos = true\n"
            "decoder_start_id = 95\neos_id = 0\nencoder_layers = 3\nlayer_norm_eps = 1e-6");
  else if (variants == 2)
    c.parse("activation = gelu\nposition_layout = fairseq\nposition_offset = 2\nscale_embeddings = false\n"
            "share_embeddings = false\ntie_output = false\nsource_eos = true\ndecoder_start_id = 3\n"
            "decoder_layers = 3");
  return c;
}

HostBatch batch(const ModelConfig& c = ModelConfig::preset("tiny")) {
  return HostBatch::from_pairs({{5, 6, 7, 8, 9, 10, 11}, {12, 13}, {14, 15, 16, 17}},
                               {{20, 21, 22}, {23, 24, 25, 26, 27, 28}, {96}}, Framing::of(c));
}

}  // namespace

TEST_CASE("one fp32 training step on cuda matches the cpu", "[model]") {
  ModelLimits limits;
  limits.max_tokens = 64;
  limits.max_len = 16;
  limits.loss_chunk = 8;
  for (const auto& [pre_norm, variants] : {std::pair{false, 0}, {true, 0}, {false, 1}, {true, 2}}) {
    const ModelConfig c = config_for(pre_norm, variants);
    Transformer cpu(c, limits, Device::cpu()), gpu(c, limits, Device::cuda(0));
    cpu.init(5);
    gpu.init(5);
    REQUIRE(test::to_f64(cpu.params()) == test::to_f64(gpu.params()));  // Philox: bit-identical

    TrainStep step;
    step.seed = 17;
    step.rng_step = 1;
    step.grad_scale = 0.1f;
    const LossSums a = cpu.forward_backward(batch(c), step);
    const LossSums b = gpu.forward_backward(batch(c), step);
    gpu.stream().synchronize();
    INFO((pre_norm ? "pre-norm" : "post-norm") << ", variants " << variants << ": loss cpu " << a.loss
                                               << " cuda " << b.loss);
    CHECK(std::abs(a.loss - b.loss) <= 1e-5 * std::abs(a.loss));
    CHECK(std::abs(a.nll - b.nll) <= 1e-5 * std::abs(a.nll));
    const double grad_err = test::relative_error(test::to_f64(gpu.grads()), test::to_f64(cpu.grads()));
    INFO("gradient relative error " << grad_err);
    CHECK(grad_err < 1e-4);

    Adam adam_cpu(cpu.params().shape(), DType::f32, cpu.stream());
    Adam adam_gpu(gpu.params().shape(), DType::f32, gpu.stream());
    adam_cpu.step(cpu.params(), cpu.grads(), 1e-3, 1, 1.0f, cpu.stream());
    adam_gpu.step(gpu.params(), gpu.grads(), 1e-3, 1, 1.0f, gpu.stream());
    gpu.stream().synchronize();
    const double param_err = test::relative_error(test::without_key_biases(test::to_f64(gpu.params()), gpu.layout()),
                                                  test::without_key_biases(test::to_f64(cpu.params()), cpu.layout()));
    INFO("parameters after Adam (key biases left out: support.h), relative error " << param_err);
    CHECK(param_err < 1e-5);
  }
}

TEST_CASE("one bf16 and one f16 training step on cuda match the fp32 cpu step", "[model]") {
  // 16-bit compute with f32 master weights: activations and GEMM operands
  // are rounded to 8 (bf16) or 11 (f16) bits, so the tolerances are those of
  // the storage, not of the arithmetic.
  ModelLimits limits;
  limits.max_tokens = 64;
  limits.max_len = 16;
  limits.loss_chunk = 8;
  struct Mode { DType dtype; double loss_tol, grad_tol; };
  for (const Mode& mode : {Mode{DType::bf16, 2e-2, 8e-2}, Mode{DType::f16, 4e-3, 2e-2}}) {
    const ModelConfig c = config_for(false);
    Transformer cpu(c, limits, Device::cpu()), gpu(c, limits, Device::cuda(0), mode.dtype);
    REQUIRE(gpu.param_dtype() == DType::f32);
    cpu.init(5);
    gpu.init(5);
    TrainStep step;
    step.seed = 17;
    step.rng_step = 1;
    const LossSums a = cpu.forward_backward(batch(), step);
    const LossSums b = gpu.forward_backward(batch(), step);
    gpu.stream().synchronize();
    INFO(dtype_name(mode.dtype) << ": loss cpu " << a.loss << " cuda " << b.loss);
    CHECK(std::abs(a.loss - b.loss) <= mode.loss_tol * std::abs(a.loss));
    const double grad_err = test::relative_error(test::to_f64(gpu.grads()), test::to_f64(cpu.grads()));
    INFO("gradient relative error " << grad_err);
    CHECK(grad_err < mode.grad_tol);

    // The optimizer updates the f32 masters; the next pass sees them.
    Adam adam(gpu.params().shape(), DType::f32, gpu.stream());
    adam.step(gpu.params(), gpu.grads(), 1e-3, 1, 1.0f, gpu.stream());
    const LossSums after = gpu.evaluate(batch());
    gpu.stream().synchronize();
    CHECK(std::isfinite(after.loss));
    CHECK(after.loss != b.loss);
  }
}
