// Writes a checkpoint of a tiny random model for the cli tests (tfm-train
// will make real ones; these need to be made in a blink):
//
//   tiny_checkpoint OUT [--seed N] [--tokenizer SPM] [--step N] [--set KEY=VALUE]...
//                  [--raw-config LINE] [--extra-tensor NAME]
//
// The tiny preset with its parameters drawn from --seed (default 1). With
// --tokenizer the SentencePiece model is embedded and sets vocab_size. With
// --step the file carries a training state as tfm-train writes it: a
// "training_state" section whose "step" line is N, and "adam.m"/"adam.v"
// sections (here: bytes that name the step, enough to see them copied).
// The last two make files that are whole (every checksum right) but wrong,
// for the readers' checks: --raw-config appends LINE to the configuration
// text as it is (no range checks: "heads = 0"), --extra-tensor adds a tensor
// the model does not have, named NAME as it is (a newline included).
#include <cstdio>
#include <cstring>
#include <string>

#include "libcore/data/vocab.h"
#include "libcore/error.h"
#include "libcore/io/average.h"
#include "libcore/model/model_io.h"

using namespace tfm;

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: tiny_checkpoint OUT [--seed N] [--tokenizer SPM] [--step N] [--set K=V]...\n");
    return 2;
  }
  try {
    ModelConfig config = ModelConfig::preset("tiny");
    uint64_t seed = 1;
    long step = -1;
    std::string tokenizer, raw_config, extra_tensor;
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string flag = argv[i], value = argv[i + 1];
      if (flag == "--seed") {
        seed = std::stoull(value);
      } else if (flag == "--tokenizer") {
        const Vocab v = Vocab::load(value);
        tokenizer = v.bytes();
        config.vocab_size = v.size();
      } else if (flag == "--step") {
        step = std::stol(value);
      } else if (flag == "--raw-config") {
        raw_config += value + "\n";
      } else if (flag == "--extra-tensor") {
        extra_tensor = value;
      } else if (flag == "--set") {
        const size_t eq = value.find('=');
        TFM_REQUIRE(eq != std::string::npos, "--set takes KEY=VALUE, not {}", value);
        config.set(value.substr(0, eq), value.substr(eq + 1));
      } else {
        fail("unknown option {}", flag);
      }
    }
    Transformer model(config, ModelLimits{64, 16, 64}, Device::cpu());
    model.init(seed);
    const std::string state = fmt::format("format = 1\nstep = {}\n", step);
    const std::string m = fmt::format("adam.m of step {}", step), v = fmt::format("adam.v of step {}", step);
    const io::NamedSection sections[] = {{io::kTrainingStateSection, state}, {"adam.m", m}, {"adam.v", v}};
    save_model(argv[1], model, tokenizer, step >= 0 ? std::span(sections) : std::span<const io::NamedSection>());
    if (!raw_config.empty() || !extra_tensor.empty()) {
      io::Checkpoint c = io::read_checkpoint(argv[1]);
      c.config += raw_config;
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
