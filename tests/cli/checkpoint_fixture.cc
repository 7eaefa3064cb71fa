// Writes a randomly initialized model as a checkpoint, for the cli tests of
// the programs that read one (tfm-decode):
//
//   tfm_test_checkpoint OUT [--tokenizer SPM.model] [--seed N] [--eos-logit X] [KEY=VALUE...]
//
// The model is the tiny preset with dropout off, changed by KEY=VALUE pairs
// of the config text form (vocab_size=64, learned_positions=true, ...).
// Random weights rarely end a sentence; --eos-logit X makes eos's logit X
// at every step (post-norm): the last layer norm's bias is 1 everywhere and
// eos's embedding X / D everywhere, so x . E[eos] = X whatever the layer
// norm's normalized part (which sums to 0), and hypotheses end at all
// lengths.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "libcore/data/vocab.h"
#include "libcore/error.h"
#include "libcore/model/model_io.h"

using namespace tfm;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tfm_test_checkpoint OUT [--tokenizer SPM] [--seed N] [KEY=VALUE...]\n");
    return 2;
  }
  try {
    ModelConfig c = ModelConfig::preset("tiny");
    c.dropout = 0.0f;
    std::string tokenizer;
    uint64_t seed = 1;
    double eos_logit = 0;
    bool eos = false;
    for (int i = 2; i < argc; ++i) {
      if (std::strcmp(argv[i], "--tokenizer") == 0 && i + 1 < argc) {
        // The model's vocabulary is the tokenizer's (every reader checks
        // that they agree); a later vocab_size=N overrides it.
        const Vocab vocab = Vocab::load(argv[++i]);
        tokenizer = vocab.bytes();
        c.vocab_size = vocab.size();
      } else if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
        seed = std::strtoull(argv[++i], nullptr, 10);
      } else if (std::strcmp(argv[i], "--eos-logit") == 0 && i + 1 < argc) {
        eos_logit = std::strtod(argv[++i], nullptr);
        eos = true;
      } else {
        c.parse(argv[i], "argument");
      }
    }
    ModelLimits limits;
    limits.inference = true;
    Transformer model(c, limits, Device::cpu());
    model.init(seed);
    if (eos) {
      TFM_REQUIRE(!c.pre_norm, "--eos-logit needs a post-norm model");
      const ParamLayout& L = model.layout();
      const TensorView beta = model.param(L.decoder.back().ffn_norm.beta);
      std::fill_n(beta.data_as<float>(), beta.numel(), 1.0f);
      float* e = model.param(L.tgt_embed).data_as<float>() + kEosId * c.d_model;
      std::fill_n(e, c.d_model, static_cast<float>(eos_logit / static_cast<double>(c.d_model)));
    }
    save_model(argv[1], model, tokenizer);
  } catch (const Error& e) {
    std::fprintf(stderr, "tfm_test_checkpoint: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
