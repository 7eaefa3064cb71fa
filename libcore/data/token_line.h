// A line of tokens as the programs read it (tfm-decode, tfm-score -m,
// tfm-attnviz --pieces, tfm-tok -d --ids): one parser, one set of messages.
// Fields are separated by spaces, tabs or '\r', a run of them counting as
// one; a field is a piece, looked up in the vocabulary (an unknown piece is
// <unk>, as SentencePiece reads it), or with --ids a decimal token id in
// [0, vocab_size). Errors say the token and the rule; the caller adds where
// (FILE:LINE).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace tfm {

class Vocab;

// The fields of `line`.
std::vector<std::string_view> token_fields(std::string_view line);

// One field as a token id: "'x' is not a token id (--ids)", "token id 99 is
// outside the model's vocabulary [0, 64)".
int32_t parse_token_id(std::string_view field, int64_t vocab_size);

// The line as ids: pieces looked up in `vocab`, or ids when vocab is null.
std::vector<int32_t> parse_token_line(std::string_view line, const Vocab* vocab, int64_t vocab_size);

}  // namespace tfm
