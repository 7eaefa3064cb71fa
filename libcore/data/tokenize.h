// tfm-tok's work (cmd/tfm-tok.cc is only its options): training the shared
// SentencePiece model, and the encode/decode filter.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "libcore/data/vocab.h"

namespace tfm {
class Progress;
}

namespace tfm::data {

struct TrainOptions {
  std::string output;               // OUT.model, written atomically
  int64_t vocab_size = 37000;
  std::string model_type = "bpe";   // bpe | unigram
  double character_coverage = 1.0;  // 0.9995 is typical for CJK
  int64_t max_sentences = 0;        // sample this many input lines; 0: all
  int64_t seed = -1;                // SentencePiece's random seed; < 0: its default
  std::vector<std::string> user_symbols;
  int threads = 0;                  // 0: every core
  bool verbose = false;             // let SentencePiece log
  Progress* progress = nullptr;     // lines read, then the time training has taken
};

// Trains one model from all `inputs` (plain or gzip; "-" is stdin) with the
// reserved ids of libcore/data/vocab.h, and writes it to options.output.
// Throws Error with one sentence on bad input; no file is left on error.
void train_vocab(const std::vector<std::string>& inputs, const TrainOptions& options);

enum class TokMode { encode, decode };

struct StreamOptions {
  TokMode mode = TokMode::encode;
  bool ids = false;          // ids instead of pieces (output of encode, input of decode)
  // The model that segments (encode) or joins (decode) text; by default the
  // source side's when encoding and the target side's when decoding. One
  // model for both with a plain vocabulary.
  std::optional<Side> side;
  int threads = 0;           // 0: every core
  size_t chunk_lines = 4096; // lines encoded in parallel at a time
  Progress* progress = nullptr;  // lines and bytes of each input done, after every chunk
};

// The filter: each line of `inputs` ("-" or none: stdin) in turn, one output
// line per input line, in order, byte-identical to spm_encode
// --output_format=piece|id and spm_decode --input_format=piece|id.
// Errors name FILE:LINE; lines before a bad one are written.
void tokenize_stream(const Vocab& vocab, const std::vector<std::string>& inputs,
                     std::FILE* out, const StreamOptions& options);

// One line each way (what tokenize_stream does per line).
std::string encode_line(const Vocab& vocab, std::string_view line, bool ids, Side side = Side::source);
std::string decode_line(const Vocab& vocab, std::string_view line, bool ids, Side side = Side::target);

}  // namespace tfm::data
