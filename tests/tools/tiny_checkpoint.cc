// Writes a checkpoint of a tiny random model for the cli tests (tfm-train
// makes real ones; these need to be made in a blink). The one fixture of
// the programs that read a checkpoint:
//
//   tiny_checkpoint OUT [--preset NAME] [--seed N] [--tokenizer SPM] [--eos-logit X] [--copy]
//                  [--step N] [--set KEY=VALUE | KEY=VALUE]... [--raw-config LINE] [--extra-tensor NAME]
//
// The tiny preset (or --preset base, big) with its parameters drawn from
// --seed (default 1), changed by KEY=VALUE pairs of the config text form
// (vocab_size=64, pre_norm=true, ...). With --tokenizer the SentencePiece
// model is embedded and sets vocab_size (a later vocab_size=N overrides it).
//
// Random weights rarely end a sentence; --eos-logit X makes eos's logit X
// at every step (post-norm): the last layer norm's bias is 1 everywhere and
// eos's embedding X / D everywhere, so x . E[eos] = X whatever the layer
// norm's normalized part (which sums to 0), and hypotheses end at all
// lengths.
//
// --copy sets weights that copy the source, so that outputs end where their
// sources do (copy_model.h): a decoding benchmark's model of any shape at
// natural lengths, and a model whose right output is known.
//
// With --step the file carries a training state as tfm-train writes it: a
// "training_state" section whose "step" line is N, and "adam.m"/"adam.v"
// sections (here: bytes that name the step, enough to see them copied).
// The last two make files that are whole (every checksum right) but wrong,
// for the readers' checks: --raw-config puts LINE in the configuration text
// as it is, in place of its key's line (no range checks: "heads = 0"),
// --extra-tensor adds a tensor
// the model does not have, named NAME as it is (a newline included).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "libcore/base/error.h"
#include "libcore/data/vocab.h"
#include "libcore/model/average.h"
#include "libcore/model/model_io.h"
#include "tests/tools/copy_model.h"

using namespace tfm;

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: tiny_checkpoint OUT [--preset NAME] [--seed N] [--tokenizer SPM] [--eos-logit X] [--copy] "
                 "[--step N] "
                 "[--set K=V | K=V]... [--raw-config LINE] [--extra-tensor NAME]\n");
    return 2;
  }
  try {
    ModelConfig config = ModelConfig::preset("tiny");
    uint64_t seed = 1;
    long step = -1;
    double eos_logit = 0;
    bool eos = false, copy = false;
    std::string tokenizer, raw_config, extra_tensor;
    for (int i = 2; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "--copy") {
        copy = true;
      } else if (flag.starts_with("--")) {
        TFM_REQUIRE(i + 1 < argc, "{} needs a value", flag);
        const std::string value = argv[++i];
        if (flag == "--preset") {
          TFM_REQUIRE(i == 3, "--preset comes first, before what it would reset");
          config = ModelConfig::preset(value);
        } else if (flag == "--seed") {
          seed = std::stoull(value);
        } else if (flag == "--tokenizer") {
          const Vocab v = Vocab::load(value);
          tokenizer = v.bytes();
          config.vocab_size = v.size();
        } else if (flag == "--eos-logit") {
          eos_logit = std::stod(value);
          eos = true;
        } else if (flag == "--step") {
          step = std::stol(value);
        } else if (flag == "--raw-config") {
          raw_config += value + "\n";
        } else if (flag == "--extra-tensor") {
          extra_tensor = value;
        } else if (flag == "--set") {
          config.parse(value, "--set");
        } else {
          fail("unknown option {}", flag);
        }
      } else {
        config.parse(flag, "argument");  // KEY=VALUE
      }
    }
    if (copy) config.source_eos = config.learned_positions = true;  // copy_model.h
    ModelWeights model(config, Device::cpu());
    model.init(seed);
    if (copy) make_copy_model(model, seed);
    if (eos) {
      TFM_REQUIRE(!config.pre_norm, "--eos-logit needs a post-norm model");
      const ParamLayout& L = model.layout();
      const TensorView beta = model.param(L.decoder.back().ffn_norm.beta);
      std::fill_n(beta.data_as<float>(), beta.numel(), 1.0f);
      float* e = model.param(L.tgt_embed).data_as<float>() + kEosId * config.d_model;
      std::fill_n(e, config.d_model, static_cast<float>(eos_logit / static_cast<double>(config.d_model)));
    }
    const std::string state = fmt::format("format = 1\nstep = {}\n", step);
    const std::string m = fmt::format("adam.m of step {}", step), v = fmt::format("adam.v of step {}", step);
    const io::NamedSection sections[] = {{kTrainingStateSection, state}, {"adam.m", m}, {"adam.v", v}};
    save_model(argv[1], model, tokenizer, step >= 0 ? std::span(sections) : std::span<const io::NamedSection>());
    if (!raw_config.empty() || !extra_tensor.empty()) {
      io::Checkpoint c = io::read_checkpoint(argv[1]);
      // LINE replaces its key's line (a key given twice is an error of its own).
      const std::string key = raw_config.substr(0, raw_config.find_first_of(" ="));
      size_t at = 0;
      while (at < c.config.size() && c.config.compare(at, key.size() + 1, key + " ") != 0 &&
             c.config.compare(at, key.size() + 1, key + "=") != 0) {
        const size_t nl = c.config.find('\n', at);
        at = nl == std::string::npos ? c.config.size() : nl + 1;
      }
      const size_t end = std::min(c.config.find('\n', at), c.config.size());
      if (at < c.config.size())
        c.config.replace(at, end - at, raw_config);
      else
        c.config += raw_config + "\n";
      if (!extra_tensor.empty()) {
        io::CheckpointTensor t{extra_tensor, DType::f32, Shape{2}, {}};
        t.data.resize(8);
        c.tensors.push_back(std::move(t));
      }
      io::write_checkpoint(argv[1], c);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tiny_checkpoint: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
