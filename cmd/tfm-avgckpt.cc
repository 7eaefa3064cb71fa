// tfm-avgckpt: the element-wise mean of the parameters of several
// checkpoints of one model (the paper averages the last 5 of base, the last
// 20 of big), as a checkpoint for decoding.
//
//   tfm-avgckpt -o avg.bin ckpt/checkpoint_96000.bin ckpt/checkpoint_98000.bin ...
//   tfm-avgckpt -o avg.bin --last 5 ckpt/          the newest 5 by training step
//   tfm-avgckpt -o avg.bin --last 5 ckpt/ --keep-state
//
// The inputs are streamed one at a time into a float64 sum (memory: two
// models, whatever their number); libcore/model/average.h has the contracts.
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "libcore/app/app.h"
#include "libcore/base/log.h"
#include "libcore/base/progress.h"
#include "libcore/model/average.h"

namespace {

struct Options {
  tfm::CommonOptions common;
  std::string output;
  std::vector<std::string> inputs;
  int64_t last = 0;
  std::string dir;
  tfm::AverageOptions average;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "Average the parameters of checkpoints of one model into one checkpoint: CKPT... or\n"
      "the newest N of a directory by training step (--last N DIR). Configuration,\n"
      "vocabulary and every tensor's shape must agree; the training state is dropped."};
  tfm::add_common_options(app, o.common);
  app.add_option("-o,--output", o.output, "Where to write the average (written atomically)")
      ->required();
  auto* last = app.add_option("--last", o.last, "Average the newest N checkpoints of DIR by training step")
                   ->check(tfm::AtLeast(int64_t{1}));
  app.add_option("CKPT", o.inputs, "Checkpoints to average (or DIR with --last)");
  app.add_flag("--keep-state", o.average.keep_state,
               "Keep the newest checkpoint's training state (step, Adam's moments) verbatim");
  app.add_option("--zstd-level", o.average.write.zstd_level, "Compression level of the output, 1..19 (default 3)")
      ->check(tfm::Range(1, 19));

  app.callback([&] {
    if (*last) {
      if (o.inputs.size() != 1)
        throw CLI::ValidationError("--last", "takes N and exactly one DIR");
      o.dir = o.inputs.front();
      o.inputs.clear();
    } else if (o.inputs.empty()) {
      throw CLI::ValidationError("CKPT", "no checkpoints: give CKPT... or --last N DIR");
    }
  });

  return tfm::run_program("tfm-avgckpt", app, argc, argv, o.common, [&] {
    if (!o.dir.empty()) {
      o.inputs = tfm::newest_checkpoints(o.dir, o.last);
      tfm::log::info("the newest {} of {}: {}", o.inputs.size(), o.dir, fmt::join(o.inputs, " "));
    }
    tfm::Progress progress(o.common.quiet);
    o.average.progress = &progress;
    const tfm::AverageReport r = tfm::average_checkpoints(o.inputs, o.output, o.average);
    tfm::log::info("{}: the mean of {} checkpoint{} ({} tensors, {} parameters){}", o.output,
                   o.inputs.size(), o.inputs.size() == 1 ? "" : "s", r.tensors, r.elements,
                   r.sections.empty() ? std::string()
                                      : fmt::format(", training state of {}", r.newest));
  });
}
