// Fuzz target: the configuration parsers: a checkpoint's model
// configuration (ModelConfig::parse, validate), tfm-train's training knobs
// from "key = value" text (TrainOptions::set, as --config files and
// checkpoints' training states give them) and durations. Any input must end
// in a tfm::Error sentence, or in values whose text form (what
// --dump-config and checkpoints write) parses back to the same values: an
// Error there is not caught, so it is a finding too.
#include <cstdint>
#include <optional>
#include <string_view>

#include "libcore/base/error.h"
#include "libcore/io/key_value.h"
#include "libcore/model/config.h"
#include "libcore/train/options.h"

namespace {

void set_all(tfm::train::TrainOptions& o, std::string_view text, std::string_view source) {
  tfm::io::for_each_key_value(text, source, [&](std::string_view k, std::string_view v) { o.set(k, v); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<tfm::ModelConfig> config;
  try {
    tfm::ModelConfig c;
    c.parse(text, "fuzz");
    c.validate();
    config = c;
  } catch (const tfm::Error&) {
  }
  if (config) {
    tfm::ModelConfig back;
    back.parse(config->to_text(), "to_text");
    back.validate();
    if (!(back == *config)) __builtin_trap();
    (void)config->parameter_count();
  }

  std::optional<tfm::train::TrainOptions> options;
  try {
    tfm::train::TrainOptions o;
    set_all(o, text, "fuzz");
    options = o;
  } catch (const tfm::Error&) {
  }
  if (options) {
    tfm::train::TrainOptions back;
    set_all(back, options->to_text(), "to_text");
    if (!(back == *options)) __builtin_trap();
  }

  try {
    const double seconds = tfm::train::parse_duration("fuzz", text);
    if (!(seconds >= 0)) __builtin_trap();
  } catch (const tfm::Error&) {
  }
  return 0;
}
