#include "libcore/io/key_value.h"

#include <charconv>
#include <cmath>
#include <utility>
#include <vector>

#include "libcore/base/error.h"
#include "libcore/base/range.h"

namespace tfm::io {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

void for_each_key_value(std::string_view text, std::string_view source,
                        const std::function<void(std::string_view, std::string_view)>& set) {
  int line_no = 0;
  // Keys and their lines: a key given twice is an error, never "the last
  // one wins" (the readers take the text as flat: a header starts no new
  // set of keys).
  std::vector<std::pair<std::string_view, int>> seen;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty() || line.front() == '[') continue;  // blank, or an INI section header
    const size_t eq = line.find('=');
    try {
      if (eq == std::string_view::npos) fail("expected 'key = value', got '{}'", printable(line));
      const std::string_view key = trim(line.substr(0, eq));
      for (const auto& [k, at] : seen)
        if (k == key) fail("'{}' is given twice (first on line {})", printable(key), at);
      seen.emplace_back(key, line_no);
      set(key, trim(line.substr(eq + 1)));
    } catch (const Error& e) {
      throw Error(e.what(), fmt::format("{}:{}", source, line_no));
    }
  }
}

int64_t parse_int(std::string_view what, std::string_view v, int64_t lo, int64_t hi) {
  int64_t x = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || v.empty())
    fail("{} must be an integer, got '{}'", what, printable(v));
  if (x < lo || x > hi) fail("{} {}", what, out_of_range(lo, hi, x, plain_number(x)));
  return x;
}

uint64_t parse_uint(std::string_view what, std::string_view v) {
  uint64_t x = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || v.empty())
    fail("{} must be a non-negative integer, got '{}'", what, printable(v));
  return x;
}

double parse_double(std::string_view what, std::string_view v, double lo, double hi) {
  double x = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || v.empty() || !std::isfinite(x))
    fail("{} must be a number, got '{}'", what, printable(v));
  if (x < lo || x > hi) fail("{} {}", what, out_of_range(lo, hi, x, printable(v)));
  return x;
}

bool parse_bool(std::string_view what, std::string_view v) {
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  fail("{} must be true or false, got '{}'", what, printable(v));
}

}  // namespace tfm::io
