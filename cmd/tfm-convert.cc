// tfm-convert: a model another toolkit trained, as a tfm checkpoint with its
// vocabulary embedded, ready for tfm-decode, tfm-score -m and tfm-train
// --init.
//
//   tfm-convert opus-mt-en-de/ -o en-de.bin               a Hugging Face MarianMTModel directory
//   tfm-convert model.npz -o en-de.bin                    a Marian model (vocabulary and
//                                                         SentencePiece models beside it)
//   tfm-convert checkpoint_best.pt -o en-de.bin           a fairseq transformer
//   tfm-convert en-de.bin --to ct2 -o en-de-ct2/          a CTranslate2 model directory
//
// The formats, what each becomes and what is refused: man/tfm-convert.1 and
// libcore/convert/convert.h.
#include <string>
#include <utility>

#include "libcore/app/app.h"
#include "libcore/base/log.h"
#include "libcore/convert/convert.h"

namespace {

struct Options {
  tfm::CommonOptions common;
  tfm::convert::ConvertOptions convert;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "Convert a model of another toolkit into a tfm checkpoint (vocabulary embedded): a\n"
      "Hugging Face MarianMTModel directory (OPUS-MT's models), a Marian model (.npz) or a\n"
      "fairseq transformer checkpoint (.pt); or a tfm checkpoint into a CTranslate2 model\n"
      "directory (--to ct2)."};
  tfm::add_common_options(app, o.common);
  app.add_option("INPUT", o.convert.input, "The model: a Hugging Face directory, a Marian .npz or a fairseq .pt")
      ->required();
  app.add_option("-o,--output", o.convert.output,
                 "The tfm checkpoint to write (with --to ct2, the directory), atomically")
      ->required();
  app.add_option("--from", o.convert.from, "The input's toolkit (default auto: by what INPUT holds)")
      ->check(CLI::IsMember({"auto", "hf", "marian", "fairseq"}));
  app.add_option("--vocab", o.convert.vocab,
                 "The vocabulary (default: vocab.json in a Hugging Face directory; the one *.vocab.yml beside a "
                 "Marian model, which may also be a .json; fairseq's dict.SRC.txt and dict.TGT.txt beside it)");
  app.add_option("--to", o.convert.to,
                 "What to write: tfm (a checkpoint, from another toolkit's model) or ct2 (a CTranslate2 model "
                 "directory, from a tfm checkpoint)")
      ->check(CLI::IsMember({"tfm", "ct2"}));
  std::string quantization = "none";
  app.add_option("--quantization", quantization,
                 "--to ct2: the weights as none (float32), int8, int16, float16 or bfloat16")
      ->check(CLI::IsMember({"none", "float32", "int8", "int16", "float16", "bfloat16"}));
  app.add_flag("--ids", o.convert.ct2.ids, "--to ct2: tokens named by their ids (for checkpoints without a tokenizer)");
  app.add_flag("--force", o.convert.ct2.replace,
               "--to ct2: replace an existing CTranslate2 model directory (one that holds model.bin, or empty)");
  app.add_option("--source-spm", o.convert.source_spm,
                 "The SentencePiece model of the source side (default: source.spm beside INPUT; fairseq: "
                 "sentencepiece.bpe.model)");
  app.add_option("--target-spm", o.convert.target_spm,
                 "The SentencePiece model of the target side (default: target.spm beside INPUT; fairseq: "
                 "sentencepiece.bpe.model)");

  app.callback([&] {
    const bool ct2 = o.convert.to == "ct2";
    for (const auto& [option, given] : {std::pair{"--quantization", app.count("--quantization") > 0},
                                        {"--ids", o.convert.ct2.ids}, {"--force", o.convert.ct2.replace}})
      if (given && !ct2) throw CLI::ValidationError(option, "is for --to ct2");
    o.convert.ct2.quantization = tfm::convert::parse_ct2_quantization(quantization);
  });

  return tfm::run_program("tfm-convert", app, argc, argv, o.common, [&] {
    const tfm::convert::ConvertReport r = tfm::convert::convert_model(o.convert);
    tfm::log::info("{}: {} from {} ({} parameters, vocabulary of {} pieces)", o.convert.output, r.architecture,
                   r.origin, r.parameters, r.vocab_size);
  });
}
