#include "libcore/io/json_read.h"

#include <charconv>
#include <cmath>
#include <unordered_set>

#include "libcore/base/error.h"
#include "libcore/base/utf8.h"
#include "libcore/io/foreign_bytes.h"

namespace tfm::io {

namespace {

class JsonParser {
 public:
  JsonParser(std::string_view text, const std::string& origin) : s_(text), origin_(origin) {}

  Value document() {
    skip_space();
    Value v = value(0);
    skip_space();
    if (pos_ < s_.size()) error("unexpected text after the JSON value");
    v.name_tree(origin_);
    return v;
  }

 private:
  [[noreturn]] void error(std::string_view what) const { error_at(pos_, what); }
  [[noreturn]] void error_at(size_t at, std::string_view what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        column = 1;
      } else if ((static_cast<unsigned char>(s_[i]) & 0xc0) != 0x80) {
        ++column;  // characters, not the continuation bytes of one
      }
    }
    throw Error(std::string(what), fmt::format("{}:{}:{}", origin_, line, column));
  }

  // What is at the current position, for messages.
  std::string seen() const {
    if (pos_ >= s_.size()) return "the end of the text";
    return fmt::format("'{}'", printable(s_.substr(pos_, 1)));
  }

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  void expect_word(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) error(fmt::format("expected a JSON value, got {}", seen()));
    pos_ += word.size();
  }

  Value value(int depth) {
    if (depth > 512) error("the JSON nests deeper than 512 levels");
    if (pos_ >= s_.size()) error("expected a JSON value, got the end of the text");
    switch (s_[pos_]) {
      case '{': return object(depth);
      case '[': return array(depth);
      case '"': return Value::string(string());
      case 't': expect_word("true"); return Value::boolean(true);
      case 'f': expect_word("false"); return Value::boolean(false);
      case 'n': expect_word("null"); return Value();
      default:
        if (s_[pos_] == '-' || (s_[pos_] >= '0' && s_[pos_] <= '9')) return number();
        error(fmt::format("expected a JSON value, got {}", seen()));
    }
  }

  // After a member or element: true past a ',', false past `close`.
  bool more(char close, std::string_view in) {
    skip_space();
    if (pos_ < s_.size() && (s_[pos_] == ',' || s_[pos_] == close)) return s_[pos_++] == ',';
    error(fmt::format("expected ',' or '{}' in {}, got {}", close, in, seen()));
  }

  Value object(int depth) {
    ++pos_;  // {
    Value::Dict members;
    std::unordered_set<std::string> keys;  // vocab.json has tens of thousands
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return Value::dict(std::move(members));
    }
    while (true) {
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != '"') error(fmt::format("expected a string key, got {}", seen()));
      const size_t key_at = pos_;
      std::string key = string();
      if (!keys.insert(key).second) error_at(key_at, fmt::format("the key '{}' is given twice", printable(key)));
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != ':') error(fmt::format("expected ':' after a key, got {}", seen()));
      ++pos_;
      skip_space();
      Value v = value(depth + 1);
      members.emplace_back(Value::string(std::move(key)), std::move(v));
      if (!more('}', "an object")) return Value::dict(std::move(members));
    }
  }

  Value array(int depth) {
    ++pos_;  // [
    Value::List items;
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return Value::list(std::move(items));
    }
    while (true) {
      skip_space();
      items.push_back(value(depth + 1));
      if (!more(']', "an array")) return Value::list(std::move(items));
    }
  }

  uint32_t hex4() {
    if (pos_ + 4 > s_.size()) error("a \\u escape needs four hex digits");
    uint32_t cp = 0;
    for (int k = 0; k < 4; ++k) {
      const int d = hex_digit(s_[pos_++]);
      if (d < 0) error("a \\u escape needs four hex digits");
      cp = cp * 16 + static_cast<uint32_t>(d);
    }
    return cp;
  }

  // A well-formed UTF-8 sequence at pos_ (no overlong forms, surrogates or
  // code points past U+10FFFF), copied to `out`.
  void utf8_char(std::string& out) {
    const auto at = [&](size_t k) { return static_cast<unsigned char>(s_[k]); };
    const unsigned char c = at(pos_);
    const size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    bool ok = n > 0 && pos_ + n <= s_.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (at(pos_ + k) & 0xc0) == 0x80;
    if (ok && n >= 3) {
      const unsigned char c1 = at(pos_ + 1);
      ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0) && !(c == 0xf0 && c1 < 0x90) &&
           !(c == 0xf4 && c1 >= 0x90);
    }
    if (!ok) error("a string holds bytes that are not UTF-8");
    out.append(s_.substr(pos_, n));
    pos_ += n;
  }

  std::string string() {
    ++pos_;  // "
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) error("a string is not closed");
      const auto c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) error("a string holds a control character (escape it)");
      if (c >= 0x80) {
        utf8_char(out);
        continue;
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      const size_t escape_at = pos_++;
      if (pos_ >= s_.size()) error("a string is not closed");
      const char e = s_[pos_++];
      if (const int c = escaped_char(e, false); c >= 0) {
        out += static_cast<char>(c);
        continue;
      }
      if (e != 'u') error_at(escape_at, fmt::format("a string holds an unknown escape '\\{}'", printable(std::string_view(&e, 1))));
      uint32_t cp = hex4();
      if (cp >= 0xdc00 && cp <= 0xdfff) error_at(escape_at, "a string holds a lone low surrogate");
      if (cp >= 0xd800 && cp <= 0xdbff) {
        if (s_.substr(pos_, 2) != "\\u") error_at(escape_at, "a string holds a lone high surrogate");
        pos_ += 2;
        const uint32_t low = hex4();
        if (low < 0xdc00 || low > 0xdfff) error_at(escape_at, "a string holds a lone high surrogate");
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
      }
      append_utf8(static_cast<char32_t>(cp), out);
    }
  }

  Value number() {
    const size_t start = pos_;
    const auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (s_[pos_] == '-') ++pos_;
    const size_t int_start = pos_;
    const size_t int_digits = digits();
    if (int_digits == 0) error_at(start, "a number needs digits");
    if (int_digits > 1 && s_[int_start] == '0') error_at(start, "a number has a leading zero");
    bool integral = true;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      integral = false;
      if (digits() == 0) error_at(start, "a number needs digits after its '.'");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      integral = false;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) error_at(start, "a number needs digits in its exponent");
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + pos_;
    if (integral) {
      int64_t i = 0;
      const auto [end, ec] = std::from_chars(first, last, i);
      if (ec == std::errc() && end == last) return Value::integer(i);
    }
    double d = 0;
    const auto [end, ec] = std::from_chars(first, last, d);
    // Below the smallest subnormal is zero, as every JSON reader has it.
    const std::string_view text(first, static_cast<size_t>(last - first));
    const size_t e = text.find_first_of("eE");
    if (ec == std::errc::result_out_of_range && e != std::string_view::npos && text[e + 1] == '-')
      return Value::real(*first == '-' ? -0.0 : 0.0);
    if (ec != std::errc() || end != last || !std::isfinite(d))
      error_at(start, fmt::format("the number {} is out of range", text));
    return Value::real(d);
  }

  std::string_view s_;
  const std::string& origin_;
  size_t pos_ = 0;
};

}  // namespace

Value parse_json(std::string_view text, const std::string& origin) { return JsonParser(text, origin).document(); }

}  // namespace tfm::io
