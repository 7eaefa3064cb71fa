// The Unicode that tfm-score needs to tokenize and lowercase exactly as
// sacreBLEU does under Python: UTF-8 to code points and back, Python's notion
// of whitespace (str.split, str.rstrip), str.lower() (with its final sigma
// rule), general categories P, S and N (the intl tokenizer) and the letter
// classes Moses' tokenizer.perl uses.
//
// The tables are generated from Python's unicodedata (gen_unicode_tables.py
// beside this file; Unicode 14.0.0 from Debian 12's Python 3.11). sacreBLEU's
// intl tokenizer uses the `regex` module, whose Unicode is newer (17.0 in
// regex 2026.11); the two differ only on the code points unassigned in 14.0
// (41 P, 1019 S, 456 N), which tfm treats as letters of no category.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/utf8.h"

namespace tfm::eval {

namespace unicode_data {
struct Range {
  char32_t lo, hi;
};
struct LowerPair {
  char32_t upper, lower;
};
extern const char kUnicodeVersion[];
extern const Range kSpace[], kPunct[], kSymbol[], kNumber[], kCased[], kCaseIgnorable[],
    kAlpha[], kLowercase[], kDigit[];
extern const size_t kSpaceSize, kPunctSize, kSymbolSize, kNumberSize, kCasedSize,
    kCaseIgnorableSize, kAlphaSize, kLowercaseSize, kDigitSize;
extern const LowerPair kLower[];
extern const size_t kLowerSize;
}  // namespace unicode_data

// The Unicode version of the tables ("14.0.0").
const char* unicode_version();

// Appends the code points of `text` to `out`. Returns false (leaving `out`
// with what was decoded) when `text` is not valid UTF-8: an overlong form, a
// surrogate, a value past U+10FFFF or a truncated sequence.
bool decode_utf8(std::string_view text, std::u32string& out);
// True when `text` is valid UTF-8 in the sense of decode_utf8.
bool valid_utf8(std::string_view text);
using tfm::append_utf8;  // base/utf8.h
std::string to_utf8(std::u32string_view text);

bool is_space(char32_t c);    // str.isspace()
bool is_punct(char32_t c);    // \p{P}
bool is_symbol(char32_t c);   // \p{S}
bool is_number(char32_t c);   // \p{N}
bool is_alpha(char32_t c);    // Moses \p{IsAlpha}: L* and Nl
bool is_lower(char32_t c);    // Moses \p{IsLower}: the Lowercase property
bool is_digit(char32_t c);    // Nd
inline bool is_alnum(char32_t c) { return is_alpha(c) || is_digit(c); }  // \p{IsAlnum}

// Python's str.lower(): full lowercase mapping (U+0130 becomes "i\u0307")
// and the final sigma rule for U+03A3.
std::u32string py_lower(std::u32string_view text);
// The same on UTF-8 (valid UTF-8 in, UTF-8 out); ASCII takes a fast path.
std::string py_lower_utf8(std::string_view text);

// Python's str.rstrip() and str.split() on UTF-8 text.
std::string_view rstrip(std::string_view text);
// Appends the words of `text` (split on runs of is_space) to `words`.
void split_words(std::string_view text, std::vector<std::string_view>& words);

}  // namespace tfm::eval
