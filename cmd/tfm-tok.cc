// tfm-tok: the shared SentencePiece vocabulary: train it, and tokenize with it.
//
//   tfm-tok train -o spm.model train.en train.de    one model for both sides
//   tfm-tok -m spm.model < text > pieces            encode (the default)
//   tfm-tok -m spm.model --ids < text > ids         ids instead of pieces
//   tfm-tok -d -m model.bin < pieces > text         decode; a checkpoint works too
//   tfm-tok -m opus.tfmvocab --side target < de     a bundle's target model
//   tfm-tok shortlist -o list.txt train.en.pieces train.de.pieces   tfm-decode --shortlist's file
//
// Encoding and decoding are byte-identical to spm_encode/spm_decode, stream
// in chunks encoded in parallel, and keep the order of the lines. With a
// vocabulary bundle (libcore/data/vocab.h) encoding uses its source model
// and decoding its target model, unless --side names one for both.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "libcore/app/app.h"
#include "libcore/base/log.h"
#include "libcore/base/progress.h"
#include "libcore/data/tokenize.h"
#include "libcore/data/vocab.h"
#include "libcore/decode/shortlist.h"

namespace {

struct Options {
  tfm::CommonOptions common;
  std::string model;
  bool decode = false;
  bool ids = false;
  std::string side;  // "", source or target
  int threads = 0;
  std::vector<std::string> files;
  tfm::data::TrainOptions train;
  std::vector<std::string> train_files;
  tfm::ShortlistBuildOptions shortlist;
  std::string shortlist_source, shortlist_target;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  // "tfm-tok encode ..." and "tfm-tok decode ..." are spelled-out modes of the
  // filter; "train" is a subcommand with options of its own.
  std::vector<char*> args(argv, argv + argc);
  if (argc > 1 && (std::strcmp(argv[1], "encode") == 0 || std::strcmp(argv[1], "decode") == 0)) {
    o.decode = argv[1][0] == 'd';
    args.erase(args.begin() + 1);
  }

  CLI::App app{
      "Encode text into SentencePiece pieces or ids (the default, or 'encode'), decode them\n"
      "back ('decode' or -d), train the shared model ('train'; see tfm-tok train --help), or\n"
      "build a vocabulary shortlist for tfm-decode ('shortlist'; see tfm-tok shortlist --help).\n"
      "One line in, one line out; FILE... or stdin to stdout."};
  tfm::add_common_options(app, o.common);
  app.add_option("-m,--model", o.model,
                 "SentencePiece model, vocabulary bundle or tfm checkpoint (default: $TFM_MODEL)");
  app.add_flag("-d,--decode", o.decode, "Decode pieces (or, with --ids, ids) back to text");
  app.add_flag("--ids", o.ids, "Write ids instead of pieces (read ids when decoding)");
  app.add_option("--side", o.side,
                 "A bundle's model to use, encoding and decoding alike (default: source to\n"
                 "encode, target to decode; a plain model is both)")
      ->check(CLI::IsMember({"source", "target"}));
  app.add_option("--threads", o.threads, "Threads to use (default 0: every core)")
      ->check(tfm::AtLeast(0));
  app.add_option("FILE", o.files, "Input files, plain or gzip (default or '-': stdin)");

  CLI::App* train = app.add_subcommand("train", "Train one shared model from every FILE");
  train->fallthrough();
  train->add_option("-o,--output", o.train.output, "Where to write the model (OUT.model)")
      ->required();
  train->add_option("--vocab-size", o.train.vocab_size, "Pieces in the vocabulary")
      ->default_val(37000)
      ->check(tfm::AtLeast(int64_t{5}));
  train->add_option("--model-type", o.train.model_type, "bpe or unigram")
      ->default_val("bpe")
      ->check(CLI::IsMember({"bpe", "unigram"}));
  train->add_option("--character-coverage", o.train.character_coverage,
                    "Share of characters the model covers (0.9995 is typical for CJK)")
      ->default_val(1.0)
      ->check(tfm::Range(0.0, 1.0));
  train->add_option("--max-sentences", o.train.max_sentences,
                    "Train on a random sample of this many lines (default 0: all)")
      ->default_val(0)
      ->check(tfm::AtLeast(int64_t{0}));
  train->add_option("--seed", o.train.seed, "Random seed for the sampling")
      ->check(tfm::AtLeast(int64_t{0}));
  train->add_option("--user-symbols", o.train.user_symbols,
                    "Pieces never split, comma-separated (a,b,c)")
      ->delimiter(',');
  train->add_option("--threads", o.train.threads, "Threads to use (default 0: every core)")
      ->check(tfm::AtLeast(0));
  train->add_option("FILE", o.train_files, "Training text, plain or gzip ('-': stdin)")
      ->required();

  CLI::App* shortlist = app.add_subcommand(
      "shortlist",
      "Build a vocabulary shortlist for tfm-decode from a parallel corpus of pieces:\n"
      "for each source piece, the target pieces of the sentence pairs it is in, ranked by the\n"
      "Dice coefficient 2 c(s,t) / (c(s) + c(t)) (c: sentence pairs), or with --alignments by\n"
      "the lexical probability c(s,t) / c(s) (c: links), and the most frequent target pieces\n"
      "for every sentence");
  shortlist->fallthrough();
  shortlist->add_option("-o,--output", o.shortlist.output, "Where to write the shortlist")->required();
  shortlist->add_option("--best", o.shortlist.best, "Candidates kept per source piece")
      ->default_val(50)->check(tfm::Range(int64_t{1}, int64_t{1} << 30));
  shortlist->add_option("--frequent", o.shortlist.frequent, "Most frequent target pieces every sentence gets")
      ->default_val(100)->check(tfm::Range(int64_t{0}, int64_t{1} << 30));
  shortlist->add_option("--alignments", o.shortlist.alignments,
                        "Links I-J a line (Pharaoh; or tfm-decode --alignment pieces output, which may be "
                        "TARGET itself): rank by them instead of by sentence co-occurrence");
  shortlist->add_option("--min-count", o.shortlist.min_count,
                        "Sentence pairs (links with --alignments) a source and a target piece must share to pair up")
      ->default_val(2)->check(tfm::Range(int64_t{1}, int64_t{1} << 30));
  shortlist->add_option("SOURCE", o.shortlist_source, "Source side, pieces (tfm-tok's output), plain or gzip")
      ->required();
  shortlist->add_option("TARGET", o.shortlist_target, "Target side, line by line with SOURCE")->required();

  app.callback([&] {
    if (*train || *shortlist) return;
    o.model = tfm::model_or_environment(o.model);
  });

  return tfm::run_program("tfm-tok", app, static_cast<int>(args.size()), args.data(), o.common,
                          [&] {
                            tfm::Progress progress(o.common.quiet);
                            if (*train) {
                              o.train.verbose = o.common.verbose > 0;
                              o.train.progress = &progress;
                              tfm::data::train_vocab(o.train_files, o.train);
                              return;
                            }
                            if (*shortlist) {
                              const tfm::ShortlistBuildTotals n =
                                  tfm::build_shortlist(o.shortlist_source, o.shortlist_target, o.shortlist);
                              tfm::log::info("{}: {} sentence pairs{}, {} source pieces, {} candidates",
                                             o.shortlist.output, n.pairs,
                                             o.shortlist.alignments.empty() ? ""
                                                                            : fmt::format(", {} links", n.links),
                                             n.sources, n.entries);
                              return;
                            }
                            const tfm::Vocab vocab = tfm::Vocab::load(o.model);
                            tfm::data::StreamOptions stream;
                            stream.mode = o.decode ? tfm::data::TokMode::decode
                                                   : tfm::data::TokMode::encode;
                            stream.ids = o.ids;
                            if (!o.side.empty())
                              stream.side = o.side == "source" ? tfm::Side::source : tfm::Side::target;
                            stream.threads = o.threads;
                            stream.progress = &progress;
                            tfm::data::tokenize_stream(vocab, o.files, stdout, stream);
                          });
}
