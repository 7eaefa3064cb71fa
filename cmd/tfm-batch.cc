// tfm-batch: tokenized parallel text -> a .tfmb binarized corpus, packed into
// batches of about --max-tokens source and target tokens (padding counted).
//
//   tfm-batch -m spm.model -o train.tfmb train.src.tok train.tgt.tok
//   tfm-batch -m spm.model -o train.tfmb --tsv train.tok.tsv
//   tfm-batch info train.tfmb [--json] [--max-tokens N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "libcore/app/app.h"
#include "libcore/base/error.h"
#include "libcore/base/json.h"
#include "libcore/base/log.h"
#include "libcore/base/progress.h"
#include "libcore/data/corpus.h"
#include "libcore/data/piece_table.h"
#include "libcore/data/text_pairs.h"
#include "libcore/data/vocab.h"

namespace {

struct Options {
  tfm::CommonOptions common;
  std::string model, output, tsv;
  std::vector<std::string> files;
  int32_t max_len = 250;
  double max_ratio = 9;
  int64_t max_tokens = 25000;
  int threads = 0;
  bool strict = false, json = false;
};

struct InfoOptions {
  std::string file;
  bool json = false;
  int64_t max_tokens = 0;  // 0: the stored batches
};

constexpr size_t kShownInvalid = 10;  // invalid lines named one by one

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void build(const Options& o) {
  const auto start = std::chrono::steady_clock::now();
  const tfm::Vocab vocab = tfm::Vocab::load(o.model);
  const tfm::PieceTable pieces = tfm::PieceTable::of(vocab);
  const tfm::TextFilter filter{o.max_len, o.max_ratio, o.strict};
  tfm::Progress progress(o.common.quiet);
  tfm::TextReadOptions read{o.threads};
  read.progress = &progress;
  tfm::TextPairs text = o.tsv.empty()
                            ? tfm::read_text_pairs(o.files[0], o.files[1], pieces, filter, read)
                            : tfm::read_tsv_pairs(o.tsv, pieces, filter, read);
  tfm::log::debug("read and filtered {} lines in {:.3f} s", text.counts.lines, seconds_since(start));
  const tfm::FilterCounts& n = text.counts;
  for (size_t i = 0; i < std::min(text.invalid.size(), kShownInvalid); ++i)
    tfm::log::warn("skipped a line of invalid UTF-8 ({})", text.where(text.invalid[i]));
  if (text.invalid.size() > kShownInvalid)
    tfm::log::warn("skipped {} more lines of invalid UTF-8", text.invalid.size() - kShownInvalid);
  const tfm::CorpusMeta meta{vocab.fingerprint(), vocab.size(), o.max_len, o.max_tokens};
  const tfm::CorpusSummary written = tfm::write_corpus(o.output, meta, text.pairs, {o.threads, &progress});
  progress.end_live();
  const tfm::PackingStats& st = written.packing;
  tfm::log::debug("wrote {} bytes; {:.3f} s in all", written.bytes, seconds_since(start));
  tfm::log::info("{}: {} of {} pairs, {} + {} tokens, {} batches of <= {} tokens", o.output,
                 n.kept, n.lines, text.pairs.src_tokens(), text.pairs.tgt_tokens(), st.batches,
                 o.max_tokens);
  tfm::log::info("skipped: {} empty, {} over --max-len {}, {} over --max-ratio {}, {} invalid UTF-8",
                 n.empty, n.too_long, o.max_len, n.ratio, o.max_ratio, n.invalid_utf8);
  if (n.src_unk + n.tgt_unk > 0)
    tfm::log::info("unknown pieces: {} source, {} target", n.src_unk, n.tgt_unk);
  if (!o.json) return;
  tfm::JsonWriter j;
  j.begin_object().field("output", o.output).field("lines", n.lines).field("pairs", n.kept);
  j.key("skipped").begin_object().field("empty", n.empty).field("max_len", n.too_long)
      .field("max_ratio", n.ratio).field("invalid_utf8", n.invalid_utf8).end_object();
  j.key("invalid_utf8_lines").begin_array();
  for (const tfm::LineRef& r : text.invalid) j.value(text.where(r));
  j.end_array();
  j.field("src_tokens", text.pairs.src_tokens()).field("tgt_tokens", text.pairs.tgt_tokens())
      .field("src_unk", n.src_unk).field("tgt_unk", n.tgt_unk).field("batches", st.batches)
      .field("src_efficiency", st.src_efficiency()).field("tgt_efficiency", st.tgt_efficiency())
      .field("bytes", written.bytes).field("max_tokens", o.max_tokens).field("max_len", o.max_len)
      .field("max_ratio", o.max_ratio).field("vocab_fingerprint", meta.fingerprint)
      .field("vocab_size", meta.vocab_size).end_object();
  std::printf("%s\n", j.str().c_str());
}

// Lengths in bins of 10 tokens: "1-10", "11-20", ...
std::map<int32_t, std::pair<int64_t, int64_t>> histogram(const tfm::Corpus& c) {
  std::map<int32_t, std::pair<int64_t, int64_t>> h;
  for (const tfm::PairLength& l : c.lengths()) {
    ++h[(l.src - 1) / 10].first;
    ++h[(l.tgt - 1) / 10].second;
  }
  return h;
}

void info(const InfoOptions& o) {
  const tfm::Corpus c = tfm::Corpus::read(o.file);
  const int64_t max_tokens = o.max_tokens > 0 ? o.max_tokens : c.meta().max_tokens;
  const std::vector<tfm::BatchRange> batches =
      o.max_tokens > 0 ? c.repack(o.max_tokens) : c.batches();
  const tfm::PackingStats st = tfm::packing_stats(c.lengths(), batches);
  const auto hist = histogram(c);
  if (o.json) {
    tfm::JsonWriter j;
    j.begin_object().field("file", o.file).field("version", c.version())
        .field("bytes", c.file_bytes()).field("pairs", c.size())
        .field("src_tokens", c.src_tokens()).field("tgt_tokens", c.tgt_tokens())
        .field("vocab_fingerprint", c.meta().fingerprint).field("vocab_size", c.meta().vocab_size)
        .field("max_len", c.meta().max_len).field("packed_max_tokens", c.meta().max_tokens)
        .field("max_tokens", max_tokens).field("batches", st.batches)
        .field("src_efficiency", st.src_efficiency()).field("tgt_efficiency", st.tgt_efficiency());
    j.key("histogram").begin_array();
    for (const auto& [bin, counts] : hist)
      j.begin_object().field("from", bin * 10 + 1).field("to", bin * 10 + 10)
          .field("src", counts.first).field("tgt", counts.second).end_object();
    j.end_array().end_object();
    std::printf("%s\n", j.str().c_str());
    return;
  }
  std::printf("file:        %s (format version %u, %llu bytes)\n", o.file.c_str(), c.version(),
              static_cast<unsigned long long>(c.file_bytes()));
  std::printf("vocabulary:  %s (%lld pieces)\n", tfm::printable(c.meta().fingerprint).c_str(),
              static_cast<long long>(c.meta().vocab_size));
  std::printf("pairs:       %zu\n", c.size());
  std::printf("tokens:      %lld source, %lld target\n", static_cast<long long>(c.src_tokens()),
              static_cast<long long>(c.tgt_tokens()));
  std::printf("max_len:     %d\n", c.meta().max_len);
  std::printf("max_tokens:  %lld%s\n", static_cast<long long>(max_tokens),
              o.max_tokens > 0 ? fmt::format(" (re-packed; stored with {})", c.meta().max_tokens).c_str()
                               : " (as packed)");
  std::printf("batches:     %lld\n", static_cast<long long>(st.batches));
  std::printf("efficiency:  source %.4f, target %.4f (real / padded tokens)\n",
              st.src_efficiency(), st.tgt_efficiency());
  std::printf("histogram:   tokens   source   target\n");
  for (const auto& [bin, counts] : hist)
    std::printf("             %3d-%-3d %8lld %8lld\n", bin * 10 + 1, bin * 10 + 10,
                static_cast<long long>(counts.first), static_cast<long long>(counts.second));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  InfoOptions io;
  CLI::App app{"Turn tokenized parallel text into a .tfmb corpus packed into batches."};
  app.fallthrough();
  tfm::add_common_options(app, o.common);
  app.add_option("-m,--model", o.model, "SentencePiece model or tfm checkpoint (the vocabulary)");
  app.add_option("-o,--output", o.output, "The .tfmb file to write");
  app.add_option("files", o.files, "SRC TGT: tokenized source and target, line by line")
      ->expected(0, 2);
  app.add_option("--tsv", o.tsv, "Read SOURCE<TAB>TARGET lines from FILE instead of SRC TGT");
  app.add_option("--max-len", o.max_len, "Skip pairs with a side longer than N tokens")
      ->default_val(250)->check(tfm::Range(1, tfm::kCorpusMaxLen));
  app.add_option("--max-ratio", o.max_ratio, "Skip pairs whose length ratio exceeds R either way")
      ->default_val(9)->check(tfm::Range(1.0, 1e9));
  app.add_option("--max-tokens", o.max_tokens,
                 "Batch budget per side, padding counted (sentences x longest)")
      ->default_val(25000)->check(tfm::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--threads", o.threads, "Threads to use (default 0: every core)")
      ->default_val(0)->check(tfm::Range(0, 1024));
  app.add_flag("--strict", o.strict, "Invalid UTF-8 is an error (FILE:LINE), not a skipped line");
  app.add_flag("--json", o.json, "Print the summary as one JSON object on stdout");
  CLI::App* info_cmd = app.add_subcommand("info", "Describe a .tfmb file: counts, lengths, batches");
  info_cmd->add_option("file", io.file, "The .tfmb file")->required();
  info_cmd->add_flag("--json", io.json, "Print one JSON object instead of text");
  info_cmd->add_option("--max-tokens", io.max_tokens, "Re-pack with N tokens per side for the stats")
      ->check(tfm::Range(int64_t{1}, int64_t{1} << 40));
  app.callback([&] {
    if (info_cmd->parsed()) {
      for (const char* build_only : {"--model", "--output", "files", "--tsv", "--max-len",
                                     "--max-ratio", "--threads", "--strict"})
        if (app.count(build_only) > 0)
          throw CLI::ValidationError("info takes only a FILE, --json and --max-tokens");
      return;
    }
    if (o.model.empty()) throw CLI::RequiredError("--model");
    if (o.output.empty()) throw CLI::RequiredError("--output");
    if (o.tsv.empty() && o.files.size() != 2)
      throw CLI::ValidationError("give SRC and TGT, or --tsv FILE");
    if (!o.tsv.empty() && !o.files.empty())
      throw CLI::ValidationError("give SRC and TGT, or --tsv FILE, not both");
    if (o.files.size() == 2 && o.files[0] == "-" && o.files[1] == "-")
      throw CLI::ValidationError("SRC and TGT cannot both be - (stdin)");
  });
  return tfm::run_program("tfm-batch", app, argc, argv, o.common, [&] {
    if (info_cmd->parsed())
      info(io);
    else
      build(o);
  });
}
