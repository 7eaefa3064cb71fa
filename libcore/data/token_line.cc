#include "libcore/data/token_line.h"

#include <charconv>

#include "libcore/base/error.h"
#include "libcore/data/vocab.h"

namespace tfm {

namespace {
bool separator(char c) { return c == ' ' || c == '\t' || c == '\r'; }
}  // namespace

std::vector<std::string_view> token_fields(std::string_view line) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < line.size();) {
    while (i < line.size() && separator(line[i])) ++i;
    size_t j = i;
    while (j < line.size() && !separator(line[j])) ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

int32_t parse_token_id(std::string_view field, int64_t vocab_size) {
  int64_t id = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), id);
  if (ec != std::errc() || end != field.data() + field.size() || field.empty())
    fail("'{}' is not a token id (--ids)", printable(field));
  if (id < 0 || id >= vocab_size) fail("token id {} is outside the model's vocabulary [0, {})", id, vocab_size);
  return static_cast<int32_t>(id);
}

std::vector<int32_t> parse_token_line(std::string_view line, const Vocab* vocab, int64_t vocab_size) {
  std::vector<int32_t> ids;
  for (std::string_view f : token_fields(line)) {
    if (vocab == nullptr) {
      ids.push_back(parse_token_id(f, vocab_size));
      continue;
    }
    const int32_t id = vocab->id(f);
    if (id >= vocab_size) fail("the piece '{}' is token id {}, outside the model's vocabulary [0, {})",
                               printable(f), id, vocab_size);
    ids.push_back(id);
  }
  return ids;
}

}  // namespace tfm
