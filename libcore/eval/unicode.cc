#include "libcore/eval/unicode.h"

#include <algorithm>

namespace tfm::eval {

namespace {

using unicode_data::Range;

bool in_ranges(char32_t c, const Range* ranges, size_t n) {
  const Range* end = ranges + n;
  const Range* it = std::upper_bound(ranges, end, c, [](char32_t v, const Range& r) { return v < r.lo; });
  return it != ranges && c <= (it - 1)->hi;
}

char32_t lower_one(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  const auto* begin = unicode_data::kLower;
  const auto* end = begin + unicode_data::kLowerSize;
  const auto* it = std::lower_bound(begin, end, c, [](const unicode_data::LowerPair& p, char32_t v) {
    return p.upper < v;
  });
  return it != end && it->upper == c ? it->lower : c;
}

bool is_cased(char32_t c) { return in_ranges(c, unicode_data::kCased, unicode_data::kCasedSize); }
bool is_case_ignorable(char32_t c) {
  return in_ranges(c, unicode_data::kCaseIgnorable, unicode_data::kCaseIgnorableSize);
}

// CPython's handle_capital_sigma: U+03A3 at i is final when a cased letter
// precedes it and none follows it (case-ignorables skipped both ways).
bool final_sigma(std::u32string_view s, size_t i) {
  size_t j = i;
  while (j > 0 && is_case_ignorable(s[j - 1])) --j;
  if (j == 0 || !is_cased(s[j - 1])) return false;
  size_t k = i + 1;
  while (k < s.size() && is_case_ignorable(s[k])) ++k;
  return k == s.size() || !is_cased(s[k]);
}

// Decodes one code point at text[i]; returns its length in bytes, 0 when invalid.
size_t decode_one(std::string_view text, size_t i, char32_t& c) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = b(i);
  if (b0 < 0x80) {
    c = b0;
    return 1;
  }
  size_t len;
  char32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, c = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, c = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, c = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    c = (c << 6) | (b(i + k) & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c < 0xE000)) return 0;
  return len;
}

}  // namespace

const char* unicode_version() { return unicode_data::kUnicodeVersion; }

bool decode_utf8(std::string_view text, std::u32string& out) {
  for (size_t i = 0; i < text.size();) {
    char32_t c = 0;
    const size_t len = decode_one(text, i, c);
    if (len == 0) return false;
    out.push_back(c);
    i += len;
  }
  return true;
}

bool valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    char32_t c = 0;
    const size_t len = decode_one(text, i, c);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string to_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) append_utf8(c, out);
  return out;
}

bool is_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  return in_ranges(c, unicode_data::kSpace, unicode_data::kSpaceSize);
}
bool is_punct(char32_t c) { return in_ranges(c, unicode_data::kPunct, unicode_data::kPunctSize); }
bool is_symbol(char32_t c) { return in_ranges(c, unicode_data::kSymbol, unicode_data::kSymbolSize); }
bool is_number(char32_t c) { return in_ranges(c, unicode_data::kNumber, unicode_data::kNumberSize); }
bool is_alpha(char32_t c) { return in_ranges(c, unicode_data::kAlpha, unicode_data::kAlphaSize); }
bool is_lower(char32_t c) {
  return in_ranges(c, unicode_data::kLowercase, unicode_data::kLowercaseSize);
}
bool is_digit(char32_t c) { return in_ranges(c, unicode_data::kDigit, unicode_data::kDigitSize); }

std::u32string py_lower(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    if (c == 0x130) {
      out += U"i\u0307";
    } else if (c == 0x3A3) {
      out += final_sigma(text, i) ? U'\u03C2' : U'\u03C3';
    } else {
      out += lower_one(c);
    }
  }
  return out;
}

std::string py_lower_utf8(std::string_view text) {
  const bool ascii = std::all_of(text.begin(), text.end(),
                                 [](char ch) { return static_cast<unsigned char>(ch) < 0x80; });
  if (ascii) {
    std::string out(text);
    for (char& ch : out)
      if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch + 32);
    return out;
  }
  std::u32string cps;
  decode_utf8(text, cps);
  return to_utf8(py_lower(cps));
}

namespace {

// The length of the whitespace code point at text[i], or 0.
size_t space_at(std::string_view text, size_t i) {
  const unsigned char b = static_cast<unsigned char>(text[i]);
  if (b < 0x80) return is_space(b) ? 1 : 0;
  char32_t c = 0;
  const size_t len = decode_one(text, i, c);
  return len != 0 && is_space(c) ? len : 0;
}

// The length of the whitespace code point ending at text[end - 1], or 0.
size_t space_before(std::string_view text, size_t end) {
  const unsigned char b = static_cast<unsigned char>(text[end - 1]);
  if (b < 0x80) return is_space(b) ? 1 : 0;
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
    --start;
  char32_t c = 0;
  const size_t len = decode_one(text, start, c);
  return len == end - start && is_space(c) ? len : 0;
}

}  // namespace

std::string_view rstrip(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    const size_t len = space_before(text, end);
    if (len == 0) break;
    end -= len;
  }
  return text.substr(0, end);
}

void split_words(std::string_view text, std::vector<std::string_view>& words) {
  size_t i = 0, start = 0;
  bool in_word = false;
  while (i < text.size()) {
    const unsigned char b = static_cast<unsigned char>(text[i]);
    const size_t len = b < 0x80 ? (b <= ' ' && is_space(b)) : space_at(text, i);
    if (len > 0) {
      if (in_word) words.push_back(text.substr(start, i - start));
      in_word = false;
      i += len;
    } else {
      if (!in_word) start = i;
      in_word = true;
      ++i;
    }
  }
  if (in_word) words.push_back(text.substr(start));
}

}  // namespace tfm::eval
