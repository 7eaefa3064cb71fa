#include "libcore/io/yaml_read.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_set>

#include "libcore/base/error.h"
#include "libcore/base/utf8.h"
#include "libcore/io/foreign_bytes.h"

namespace tfm::io {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? (the core schema's
// float, which also matches its decimal int).
bool looks_like_float(std::string_view s) {
  size_t i = 0;
  const auto digits = [&] {
    const size_t from = i;
    while (i < s.size() && is_digit(s[i])) ++i;
    return i - from;
  };
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (digits() == 0) return false;
  } else {
    if (digits() == 0) return false;
    if (i < s.size() && s[i] == '.') {
      ++i;
      digits();
    }
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

// A plain scalar typed by YAML 1.2's core schema.
Value typed_plain(std::string_view s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return Value();
  if (s == "true" || s == "True" || s == "TRUE") return Value::boolean(true);
  if (s == "false" || s == "False" || s == "FALSE") return Value::boolean(false);
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return Value::real(std::numeric_limits<double>::quiet_NaN());
  const std::string_view unsigned_part = s.front() == '-' || s.front() == '+' ? s.substr(1) : s;
  if (unsigned_part == ".inf" || unsigned_part == ".Inf" || unsigned_part == ".INF")
    return Value::real(s.front() == '-' ? -HUGE_VAL : HUGE_VAL);
  const auto based = [&](std::string_view prefix, int base) -> std::optional<Value> {
    if (s.size() <= 2 || s.substr(0, 2) != prefix) return std::nullopt;
    uint64_t u = 0;
    const auto [end, ec] = std::from_chars(s.data() + 2, s.data() + s.size(), u, base);
    if (end != s.data() + s.size()) return std::nullopt;
    if (ec != std::errc() || u > uint64_t(std::numeric_limits<int64_t>::max())) {
      double d = 0;  // past int64: the nearest float, as for decimals
      for (const char c : s.substr(2)) d = d * base + hex_digit(c);
      return Value::real(d);
    }
    return Value::integer(static_cast<int64_t>(u));
  };
  if (auto v = based("0x", 16)) return *v;
  if (auto v = based("0o", 8)) return *v;
  if (!looks_like_float(s)) return Value::string(std::string(s));
  const std::string_view number = s.front() == '+' ? s.substr(1) : s;
  const char* first = number.data();
  const char* last = number.data() + number.size();
  if (number.find_first_of(".eE") == std::string_view::npos) {
    int64_t i = 0;
    const auto [end, ec] = std::from_chars(first, last, i);
    if (ec == std::errc() && end == last) return Value::integer(i);
  }
  double d = 0;
  const auto [end, ec] = std::from_chars(first, last, d);
  if (ec == std::errc::result_out_of_range) {  // past the range of a double
    const size_t e = number.find_first_of("eE");
    const bool tiny = e != std::string_view::npos && number[e + 1] == '-';
    d = tiny ? 0.0 : HUGE_VAL;
    if (number.front() == '-') d = -d;
  }
  return Value::real(d);
}

class YamlParser {
 public:
  YamlParser(std::string_view text, const std::string& origin) : text_(text), origin_(origin) {}

  Value document() {
    Value::Dict out;
    std::unordered_set<std::string> keys;  // vocabularies have tens of thousands
    bool first = true;
    while (next_content_line()) {
      if (first && line_ == "---") {
        first = false;
        continue;
      }
      first = false;
      if (indent() > 0) error("an indented line outside a list (nested mappings are outside the subset)");
      if (starts_item()) error("a top-level list (the subset reads one top-level mapping)");
      pos_ = 0;
      std::string key = line_.substr(0, 2) == "? " || line_ == "?" ? explicit_key() : key_scalar();
      if (!keys.insert(key).second) error(fmt::format("the key '{}' is given twice", printable(key)));
      skip_spaces();
      Value v;
      if (at_end()) v = block_list();
      else v = node(false);
      end_of_line();
      out.emplace_back(Value::string(std::move(key)), std::move(v));
    }
    Value doc = Value::dict(std::move(out));
    doc.name_tree(origin_);
    return doc;
  }

 private:
  [[noreturn]] void error(std::string_view what) const {
    throw Error(std::string(what), fmt::format("{}:{}", origin_, line_no_));
  }

  // Moves to the next line that holds more than spaces and a comment;
  // false at the end of the text.
  bool next_content_line() {
    while (next_ < text_.size()) {
      const size_t nl = text_.find('\n', next_);
      const size_t end = nl == std::string_view::npos ? text_.size() : nl;
      line_ = text_.substr(next_, end - next_);
      if (!line_.empty() && line_.back() == '\r') line_.remove_suffix(1);
      next_ = end + 1;
      ++line_no_;
      size_t i = 0;
      while (i < line_.size() && line_[i] == ' ') ++i;
      if (i < line_.size() && line_[i] == '\t') error("a tab in the indentation");
      if (i < line_.size() && line_[i] != '#') return true;
    }
    return false;
  }
  // Whether the next content line exists; when it does not, or it is not
  // a list item, the position is put back.
  bool peek_item() {
    const size_t saved_next = next_;
    const int saved_no = line_no_;
    const std::string_view saved_line = line_;
    if (next_content_line() && starts_item()) return true;
    next_ = saved_next;
    line_no_ = saved_no;
    line_ = saved_line;
    return false;
  }

  size_t indent() const { return line_.find_first_not_of(' '); }
  bool starts_item() const {
    const size_t i = indent();
    return line_[i] == '-' && (i + 1 == line_.size() || line_[i + 1] == ' ');
  }
  bool at_end() const { return pos_ >= line_.size() || line_[pos_] == '#'; }
  void skip_spaces() {
    while (pos_ < line_.size() && line_[pos_] == ' ') ++pos_;
  }
  void end_of_line() {
    skip_spaces();
    if (!at_end()) error(fmt::format("unexpected text after a value: '{}'", printable(line_.substr(pos_))));
  }

  // "- a" lines at one indentation, after "key:".
  Value block_list() {
    Value::List items;
    size_t at = std::string_view::npos;
    while (peek_item()) {
      if (at == std::string_view::npos) at = indent();
      if (indent() != at) error("a list item at another indentation than the first");
      pos_ = at + 1;
      skip_spaces();
      if (at_end()) {
        items.emplace_back();
        continue;
      }
      if (line_[pos_] == '-' && (pos_ + 1 == line_.size() || line_[pos_ + 1] == ' '))
        error("a list inside a list (outside the subset)");
      items.push_back(node(false));
      end_of_line();
    }
    if (at == std::string_view::npos) return Value();  // "key:" alone
    return Value::list(std::move(items));
  }

  std::string key_scalar() {
    std::string key;
    if (line_[pos_] == '"') key = double_quoted();
    else if (line_[pos_] == '\'') key = single_quoted();
    else key = std::string(plain(false, true));
    if (pos_ >= line_.size() || line_[pos_] != ':') error("expected 'key: value'");
    ++pos_;
    if (pos_ < line_.size() && line_[pos_] != ' ') error("expected a space after 'key:'");
    return key;
  }

  // "? KEY" and, on the next line, ": VALUE" (PyYAML writes an empty key
  // or one holding a line break so); the position is left at the value.
  std::string explicit_key() {
    pos_ = 1;
    skip_spaces();
    std::string key;
    if (at_end()) error("an explicit key ('?') without a key");
    else if (line_[pos_] == '"') key = double_quoted();
    else if (line_[pos_] == '\'') key = single_quoted();
    else key = std::string(plain(false, false));
    end_of_line();
    if (!next_content_line() || !(line_.substr(0, 2) == ": " || line_ == ":"))
      error("an explicit key ('?') must be followed by a line ': value'");
    pos_ = 1;
    return key;
  }

  Value node(bool flow) {
    if (pos_ >= line_.size()) error("a value is missing");
    const char c = line_[pos_];
    if (c == '"') return Value::string(double_quoted());
    if (c == '\'') return Value::string(single_quoted());
    if (c == '[' || c == '{') return flow_collection(c);
    return typed_plain(plain(flow, false));
  }

  // A plain scalar from pos_: to the end of the line or a " #" comment (in
  // a flow, also to , ] }; as a key, to the ": ").
  std::string_view plain(bool flow, bool key) {
    const char c = line_[pos_];
    const bool next_space = pos_ + 1 >= line_.size() || line_[pos_ + 1] == ' ';
    if (c == '|' || c == '>') error("a block scalar (| or >) is outside the subset");
    if (c == '&' || c == '*' || c == '!') error("anchors, aliases and tags are outside the subset");
    if (c == '%' || c == '@' || c == '`' || c == ',' || c == ']' || c == '}' || c == '#' ||
        ((c == '-' || c == '?' || c == ':') && next_space))
      error(fmt::format("a value cannot start with '{}' (outside the subset)", c));
    const size_t start = pos_;
    for (; pos_ < line_.size(); ++pos_) {
      const char x = line_[pos_];
      const bool space_after = pos_ + 1 == line_.size() || line_[pos_ + 1] == ' ' ||
                               (flow && (line_[pos_ + 1] == ',' || line_[pos_ + 1] == ']' || line_[pos_ + 1] == '}'));
      if (x == '#' && line_[pos_ - 1] == ' ') break;
      if (flow && (x == ',' || x == ']' || x == '}')) break;
      if (x == ':' && space_after) {
        if (key || flow) break;
        error("a mapping inside a value (outside the subset)");
      }
    }
    std::string_view s = line_.substr(start, pos_ - start);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
  }

  Value flow_collection(char open) {
    const char close = open == '[' ? ']' : '}';
    // Marian's files nest one level; a bound keeps a hostile file off the stack.
    if (++flow_depth_ > kMaxFlowDepth) error(fmt::format("flow collections nested over {} deep", kMaxFlowDepth));
    ++pos_;
    Value::List items;
    Value::Dict members;
    while (true) {
      skip_spaces();
      if (pos_ >= line_.size()) error("a flow collection continues on the next line (outside the subset)");
      if (line_[pos_] == close) break;
      if (open == '[') {
        items.push_back(node(true));
      } else {
        const char c = line_[pos_];
        std::string key = c == '"' ? double_quoted() : c == '\'' ? single_quoted() : std::string(plain(true, true));
        skip_spaces();
        if (pos_ >= line_.size() || line_[pos_] != ':') error("expected 'key: value' in a flow mapping");
        ++pos_;
        skip_spaces();
        Value v = pos_ < line_.size() && (line_[pos_] == ',' || line_[pos_] == '}') ? Value() : node(true);
        members.emplace_back(Value::string(std::move(key)), std::move(v));
      }
      skip_spaces();
      if (pos_ < line_.size() && line_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < line_.size() && line_[pos_] == close) break;
      error(fmt::format("expected ',' or '{}' in a flow collection", close));
    }
    ++pos_;
    --flow_depth_;
    return open == '[' ? Value::list(std::move(items)) : Value::dict(std::move(members));
  }

  std::string single_quoted() {
    std::string out;
    for (++pos_;; ++pos_) {
      if (pos_ >= line_.size()) error("a quoted string continues on the next line (outside the subset)");
      if (line_[pos_] == '\'') {
        if (pos_ + 1 < line_.size() && line_[pos_ + 1] == '\'') {
          out += '\'';
          ++pos_;
          continue;
        }
        ++pos_;
        return out;
      }
      out += line_[pos_];
    }
  }

  uint32_t hex(int n) {
    if (pos_ + static_cast<size_t>(n) > line_.size()) error(fmt::format("an escape needs {} hex digits", n));
    uint32_t cp = 0;
    for (int k = 0; k < n; ++k) {
      const int d = hex_digit(line_[pos_++]);
      if (d < 0) error(fmt::format("an escape needs {} hex digits", n));
      cp = cp * 16 + static_cast<uint32_t>(d);
    }
    return cp;
  }

  std::string double_quoted() {
    std::string out;
    ++pos_;
    while (true) {
      if (pos_ >= line_.size()) error("a quoted string continues on the next line (outside the subset)");
      const char c = line_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= line_.size()) error("a quoted string continues on the next line (outside the subset)");
      const char e = line_[pos_++];
      if (const int c = escaped_char(e, true); c >= 0) {
        out += static_cast<char>(c);
        continue;
      }
      uint32_t cp = 0;
      switch (e) {
        case 'N': cp = 0x85; break;
        case '_': cp = 0xa0; break;
        case 'L': cp = 0x2028; break;
        case 'P': cp = 0x2029; break;
        case 'x': cp = hex(2); break;
        case 'u': cp = hex(4); break;
        case 'U': cp = hex(8); break;
        default: error(fmt::format("an unknown escape '\\{}' in a double-quoted string", printable(std::string_view(&e, 1))));
      }
      // A UTF-16 pair written as two \u escapes is joined, as emitters
      // that think in UTF-16 write them.
      if (cp >= 0xd800 && cp <= 0xdbff && line_.substr(pos_, 2) == "\\u") {
        pos_ += 2;
        const uint32_t low = hex(4);
        if (low < 0xdc00 || low > 0xdfff) error("a \\u escape names a lone surrogate");
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
      }
      if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) error(fmt::format("an escape names U+{:X}, which is not a character", cp));
      append_utf8(static_cast<char32_t>(cp), out);
    }
  }

  std::string_view text_;
  const std::string& origin_;
  size_t next_ = 0;  // where the next line starts
  int line_no_ = 0;
  std::string_view line_;
  size_t pos_ = 0;
  static constexpr int kMaxFlowDepth = 64;
  int flow_depth_ = 0;
};

}  // namespace

Value parse_yaml(std::string_view text, const std::string& origin) { return YamlParser(text, origin).document(); }

}  // namespace tfm::io
