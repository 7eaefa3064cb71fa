// A small JSON writer for --json output: builds one object or array in a
// string, with correct escaping. Not a parser.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <string_view>
#include <type_traits>

namespace tfm {

std::string json_quote(std::string_view s);

class JsonWriter {
 public:
  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }

  // Starts a member of the current object: "key":
  JsonWriter& key(std::string_view k) {
    separate();
    out_ += json_quote(k);
    out_ += ':';
    after_key_ = true;
    return *this;
  }

  JsonWriter& value(std::string_view s) { return raw(json_quote(s)); }
  JsonWriter& value(const char* s) { return raw(json_quote(s)); }
  JsonWriter& value(bool b) { return raw(b ? "true" : "false"); }
  JsonWriter& null() { return raw("null"); }
  // Numbers in their shortest exact form; NaN and infinities, which JSON
  // cannot spell, become null.
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  JsonWriter& value(T v) {
    if constexpr (std::is_floating_point_v<T>)
      if (!std::isfinite(v)) return null();
    return raw(fmt::format("{}", v));
  }

  template <typename T>
  JsonWriter& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  const std::string& str() const { return out_; }

 private:
  JsonWriter& open(char c) {
    separate();
    out_ += c;
    first_ = true;
    return *this;
  }
  JsonWriter& close(char c) {
    out_ += c;
    first_ = false;
    return *this;
  }
  JsonWriter& raw(std::string_view text) {
    separate();
    out_ += text;
    return *this;
  }
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_) out_ += ',';
    first_ = false;
  }

  std::string out_;
  bool first_ = true;
  bool after_key_ = false;
};

}  // namespace tfm
