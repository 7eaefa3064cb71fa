// tfm-decode's work (cmd/tfm-decode.cc is only its options): the filter
// from source sentences to translations.
//
// Input: one sentence a line, pieces separated by spaces (tfm-tok's output)
// or ids (`ids`); an empty line is an empty sentence. Lines are read in
// windows; a window's sentences are sorted by length and searched with
// continuous batching (libcore/decode/search.h, search_stream): at most
// `batch_size` sentences and `max_tokens` source tokens (an admission's
// padding included) decoded together, a finished sentence's place taken by
// the next at once; and written back in input order as soon as every line
// before them is done.
// With batch_size 1 the window is one line: each line is answered (and
// flushed) as soon as it is read, so the filter can sit behind a pipe.
//
// Constraints (`constraints`): each line is SOURCE<TAB>PHRASE<TAB>PHRASE...
// (fairseq's --constraints), every phrase pieces or ids like the source
// and none empty; every output contains every phrase. Prefixes
// (`prefix_file`, CTranslate2's target_prefix): its line n is the start of
// input line n's every hypothesis (empty: none), line counts matched as
// read. A line's maximum output length grows to hold its prefix and
// constraints (forced_length), within planned_output_len.
//
// Output, one per input line: the best hypothesis (pieces, ids, or text
// through the checkpoint's SentencePiece model); with n_best > 1 that many
// lines, each "LINE<TAB>HYP", LINE the 1-based number of the input line
// counted over all inputs; `scores` puts "SCORE<TAB>" before HYP; an
// alignment follows HYP as " ||| i-j ..." (Marian's); `json` writes one
// JSON object a line instead (man tfm-decode).
//
// Memory is planned once, at construction, for the largest batch the
// options allow (DecoderLimits); the batch and beam never outgrow it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "libcore/base/error.h"
#include "libcore/data/vocab.h"
#include "libcore/decode/search.h"

namespace tfm {

class Progress;
namespace data {
class LineReader;
}
class Shortlist;

// Hard alignments written with each hypothesis (Pharaoh "i-j" pairs, 0-based
// source then target positions): from the kept layer's cross-attention
// (BeamSearchOptions::attention_layer), each target token's (eos left out)
// most attended source token (the framing's eos left out; ties: the first),
// over pieces, or merged to words at SentencePiece's word boundaries (a
// piece that starts with U+2581 starts a word).
enum class Alignment { none, pieces, words };

struct TranslateOptions {
  BeamSearchOptions search;
  Alignment alignment = Alignment::none;
  int64_t alignment_heads = 0;   // average the first N heads (0: the mean of all; N needs attention_heads)
  double max_len_a = 1.0;        // output tokens at most a * |x| + b (eos not counted)
  double max_len_b = 50.0;
  int64_t max_tokens = 8192;     // source tokens decoded together, padding included
  int64_t batch_size = 0;        // sentences decoded together (0: default_batch_size of the device)
  int64_t max_input_len = 1024;  // tokens of a line; longer lines are an error ...
  bool truncate = false;         // ... or cut to it with a warning
  bool ids = false;              // read and write ids instead of pieces
  bool detok = false;            // write text (SentencePiece's decoding)
  bool scores = false;           // the hypothesis's score before it
  bool json = false;             // JSON lines with tokens, scores (and alignments)
  bool json_attention = false;   // with json: the kept attention weights too
  bool constraints = false;      // TAB fields after the source are constraints
  std::string prefix_file;       // a target prefix a line ("": none)
  ThreadWork thread_work = ThreadWork::automatic;  // how the CPU's threads share the batches
  // A vocabulary shortlist (shortlist.h; outlives the Translator): each
  // sentence scored over its own candidates only. Null: the whole vocabulary.
  const Shortlist* shortlist = nullptr;
  // Sentences done, tokens/s and the ETA (by the bytes of the inputs read,
  // when they are files), after every batch.
  Progress* progress = nullptr;
};

// Sentences decoded together when TranslateOptions::batch_size is 0: 32
// on the CPU, where a batch's key/value cache should stay near the cores
// (on a 2-core Xeon 32 decoded the demo's and base's test lines 1.2-1.4x
// faster than 256: tests/bench/NOTES.md), 256 on a GPU, whose throughput
// grows with the batch.
int64_t default_batch_size(Device device);

// The decoder limits that hold every batch a Translator with these options
// forms (sentences of at most options.max_input_len tokens).
DecoderLimits translate_limits(const ModelWeights& model, const TranslateOptions& options);

// The most output tokens a source of `source_len` tokens may get:
// floor(a * source_len + b), within the model's learned positions.
int64_t max_output_len(const ModelWeights& model, const TranslateOptions& options, int64_t source_len);

// The most output tokens any line may get: max_output_len of the longest
// line, and as many again for a prefix and constraints when they may come
// (within the model's learned positions).
int64_t planned_output_len(const ModelWeights& model, const TranslateOptions& options);

// One input line's search result, in memory: what run() formats and writes.
struct LineTranslation {
  std::vector<int32_t> source;     // the line's ids (cut to max_input_len with truncate)
  int64_t attention_columns = 0;   // S of each hypothesis's attention: the source, and eos when framed
  std::vector<Hypothesis> nbest;   // best first; one empty hypothesis for an empty line
};

struct TranslateTotals {
  int64_t sentences = 0;
  int64_t tokens = 0;  // of the best hypotheses, eos not counted
  double seconds = 0;
};

class Translator {
 public:
  // `vocab` may be null when ids come in and go out (ids, no detok).
  Translator(const ModelWeights& model, const Vocab* vocab, const TranslateOptions& options);
  // An ensemble (search.h, Team): the models' log-linear mix with these
  // weights (one a model, >= 0); they must share the vocabulary size and
  // the framing (start, eos, source eos), and the caller their tokenizer.
  Translator(const std::vector<const ModelWeights*>& models, const std::vector<double>& weights,
             const Vocab* vocab, const TranslateOptions& options);
  ~Translator();

  // Translates every line of `inputs` ("-" or none: stdin) to `out`.
  // Errors name FILE:LINE; the lines before a bad one are written first.
  TranslateTotals run(const std::vector<std::string>& inputs, std::FILE* out);

  // The same lines in memory (pieces or ids, with constraints' TAB fields
  // as run() reads them), translated in run()'s windows and batches: a
  // line's hypotheses are run()'s bit for bit. Errors name "line N" (the
  // prefix file, when there is one, is read as run() reads it).
  std::vector<LineTranslation> translate(const std::vector<std::string>& lines);
  // Ids as run() writes them: pieces joined by spaces, ids, or text (detok).
  std::string tokens_text(const std::vector<int32_t>& ids) const;

  const TranslateOptions& options() const { return options_; }
  // The decoders' memory, a model's each (an ensemble: one line a model).
  std::string memory_report() const;

 private:
  struct Item;
  std::vector<int32_t> parse(std::string_view line) const;
  void read_item(const std::string& line, Item& item) const;
  void read_prefix(data::LineReader& prefixes, Item& item) const;
  void check_forced(const Item& item, int64_t planned) const;
  std::string format(const Item& item, const std::vector<Hypothesis>& nbest) const;
  std::vector<std::pair<int64_t, int64_t>> align(const Item& item, const Hypothesis& h) const;
  // run()'s window: lines read and searched together.
  size_t window_lines() const;
  // A window's lines as items numbered from `number` + 1 (where(i): line
  // i's FILE:LINE), stopping at the first bad line: its Error is returned
  // and `items` holds the good lines before it.
  std::optional<Error> read_window(const std::vector<std::string>& lines, int64_t number,
                                   data::LineReader* prefixes, const std::function<std::string(size_t)>& where,
                                   std::vector<Item>& items) const;
  // Searches the items, sorted by length, with continuous batching;
  // done(i, nbest) for each: the empty lines first, then as they finish.
  void search_window(std::vector<Item>& items, const std::function<void(size_t, std::vector<Hypothesis>&&)>& done);
  int64_t attention_columns(const Item& item) const;

  const ModelWeights& model_;  // the first of models_
  std::vector<const ModelWeights*> models_;
  std::vector<double> weights_;
  const Vocab* vocab_;
  TranslateOptions options_;
  // search_stream's: a thread's decoders, one a model.
  std::vector<std::vector<std::unique_ptr<IncrementalDecoder>>> decoders_;
};

}  // namespace tfm
