// tfm-train: train the Transformer on .tfmb corpora with the paper's recipe;
// checkpoints by time and steps, exact resume, validation, progress.
//
//   tfm-train -m spm.model -o ckpt/ train.tfmb --dev dev.tfmb
//   tfm-train -m spm.model -o ckpt/ real.tfmb synthetic.tfmb --weights 1 0.5
//   tfm-train --resume ckpt/ train.tfmb              continue exactly
//   tfm-train --init model.bin -o ft/ in-domain.tfmb  fine-tune a model
//   tfm-train --preset big --dump-config > big.ini   then: --config big.ini
//   tfm-train plot -o curve.svg ckpt/log.json       the learning curves of --log
#include <cstdio>

#include "libcore/app/app.h"
#include "libcore/io/atomic_file.h"
#include "libcore/train/trainer.h"
#include "libcore/viz/curve.h"

int main(int argc, char** argv) {
  tfm::CommonOptions common;
  tfm::train::TrainRequest r;
  bool dump = false;
  CLI::App app{
      "Train a Transformer on .tfmb corpora (tfm-batch) with the paper's recipe: Adam, the\n"
      "warm-up schedule, label smoothing, dropout. Several corpora are mixed, each upsampled\n"
      "by its --weights factor. Checkpoints go to -o DIR by time and by steps; --resume\n"
      "continues a run exactly; --init fine-tunes a model. SIGINT/SIGTERM end the step, write\n"
      "a checkpoint and exit 0."};
  tfm::add_config_option(app, "Read options from an INI file, as --dump-config writes it");
  tfm::add_common_options(app, common);
  app.add_option("train", r.train,
                 "The training corpora (.tfmb), one or more, of one vocabulary; each weighted by "
                 "--weights")
      ->type_name("TRAIN.tfmb...");
  app.add_option("-m,--vocab", r.vocab,
                 "The SentencePiece model the corpora were made with (embedded in every checkpoint)")
      ->type_name("SPM.model");
  app.add_option("--dev", r.dev, "A dev corpus (.tfmb) for validation and the best checkpoint")
      ->type_name("DEV.tfmb");
  app.add_option("-o,--output", r.output, "Checkpoint directory (resuming: the checkpoint's)")
      ->type_name("DIR");
  CLI::Option* resume =
      app.add_option("--resume", r.resume, "Continue from a checkpoint, or from DIR/checkpoint_last.bin")
          ->type_name("DIR|FILE")
          ->configurable(false);
  app.add_option("--init", r.init,
                 "Fine-tune: a new run from this checkpoint's weights and architecture (a fresh "
                 "optimizer, schedule and data order; the corpus must use its vocabulary)")
      ->type_name("MODEL")
      ->excludes(resume);
  app.add_option("--log", r.log, "Append one JSON object a line (progress, validations) to FILE")
      ->type_name("FILE");
  tfm::add_device_option(app, r.device);
  app.add_flag("--dump-config", dump, "Print the configuration as --config reads it, and exit")
      ->configurable(false);
  tfm::train::add_model_options(app, r.overrides);
  tfm::train::add_train_options(app, r.overrides);
  // tfm-train plot: the curves of a --log file as SVG (libcore/viz/curve.h).
  struct {
    std::string log, output = "-", title;
  } plot;
  CLI::App* plot_cmd = app.add_subcommand(
      "plot", "Draw the training loss and dev perplexity of a --log file against updates, as SVG");
  plot_cmd->add_option("LOG", plot.log, "The JSON log tfm-train --log wrote")->required();
  plot_cmd->add_option("-o,--output", plot.output, "Where to write the SVG (written atomically; '-': stdout)")
      ->default_val("-");
  plot_cmd->add_option("--title", plot.title, "The title above the curves (default: LOG)");
  app.callback([&] {
    if (dump || *plot_cmd) return;
    if (r.train.empty()) throw CLI::RequiredError("TRAIN.tfmb");
    for (const auto& [key, value] : r.overrides.train) {
      if (key != "weights") continue;
      const size_t n = tfm::train::parse_weights(value).size();  // checked when given
      if (n != r.train.size())
        throw CLI::ValidationError("--weights", fmt::format("{} factors for {} training corpora: "
                                                            "give one for each",
                                                            n, r.train.size()));
    }
    if (r.output.empty() && r.resume.empty()) throw CLI::RequiredError("-o/--output");
    // A new run embeds its vocabulary; a resumed or fine-tuned one has it
    // in its checkpoint.
    if (r.vocab.empty() && r.resume.empty() && r.init.empty()) throw CLI::RequiredError("-m/--vocab");
  });
  return tfm::run_program("tfm-train", app, argc, argv, common, [&] {
    if (*plot_cmd) {
      const std::string svg = tfm::viz::curves_svg(tfm::viz::read_curves(plot.log),
                                                   plot.title.empty() ? plot.log : plot.title);
      if (plot.output == "-")
        std::fwrite(svg.data(), 1, svg.size(), stdout);
      else
        tfm::io::write_file_atomic(plot.output, svg);
      return;
    }
    if (dump) {
      std::fputs(tfm::train::dump_config(r).c_str(), stdout);
      return;
    }
    r.quiet = common.quiet;
    tfm::train::install_stop_signals();
    tfm::train::train(r);
  });
}
