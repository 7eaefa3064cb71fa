#include "libcore/base/json.h"

namespace tfm {

namespace {

// The length of the well-formed UTF-8 sequence at s[i] (no overlongs, no
// surrogates, nothing past U+10FFFF), or 0.
size_t utf8_length(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = at(i);
  const size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((at(i + k) & 0xc0) != 0x80) return 0;
  const unsigned char c1 = at(i + 1);
  if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0) || (c == 0xf0 && c1 < 0x90) ||
      (c == 0xf4 && c1 >= 0x90))
    return 0;
  return n;
}

}  // namespace

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      // JSON text is UTF-8: a byte that is not part of a well-formed
      // sequence (a corrupt or foreign name) is written as the code point
      // of the same value, \u0080..\u00ff, so the document stays valid.
      if (const size_t n = utf8_length(s, i); n > 0) {
        out.append(s.substr(i, n));
        i += n;
      } else {
        out += fmt::format("\\u{:04x}", c);
        ++i;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20)
          out += fmt::format("\\u{:04x}", c);
        else
          out += static_cast<char>(c);
    }
    ++i;
  }
  return out + "\"";
}

}  // namespace tfm
