#include "libcore/io/npz.h"

#include <fmt/ranges.h>

#include <charconv>
#include <optional>

#include "libcore/base/error.h"
#include "libcore/io/foreign_bytes.h"
#include "libcore/io/read_file.h"
#include "libcore/io/zip_read.h"

namespace tfm::io {

namespace {

// The header's dict literal: string keys; string, bool and int-tuple values.
struct NpyHeader {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<int64_t>> shape;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view s, std::string_view what) : s_(s), what_(what) {}

  NpyHeader parse() {
    NpyHeader h;
    expect('{');
    while (!peek('}')) {
      const std::string key = quoted();
      expect(':');
      if (key == "descr") h.descr = quoted();
      else if (key == "fortran_order") h.fortran_order = boolean();
      else if (key == "shape") h.shape = tuple();
      else error(fmt::format("an unknown key '{}'", printable(key)));
      if (!peek('}')) expect(',');
    }
    expect('}');
    skip_space();
    if (pos_ != s_.size()) error("text after the dict");
    if (!h.descr || !h.fortran_order || !h.shape) error("a missing key (descr, fortran_order and shape are needed)");
    return h;
  }

 private:
  [[noreturn]] void error(std::string_view problem) const {
    fail("{} has a malformed .npy header: {} in \"{}\"", what_, problem, printable(s_));
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c)) error(fmt::format("'{}' expected", c));
    ++pos_;
  }
  std::string quoted() {
    skip_space();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) error("a quoted string expected");
    const char q = s_[pos_++];
    const size_t close = s_.find(q, pos_);
    if (close == std::string_view::npos) error("an unclosed string");
    std::string out(s_.substr(pos_, close - pos_));
    if (out.find('\\') != std::string::npos) error("an escape in a string");
    pos_ = close + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}})
      if (s_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    error("True or False expected");
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> out;
    expect('(');
    while (!peek(')')) {
      int64_t d = 0;
      const auto [end, ec] = std::from_chars(s_.data() + pos_, s_.data() + s_.size(), d);
      if (ec != std::errc()) error("a dimension expected");
      pos_ = static_cast<size_t>(end - s_.data());
      if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2's long
      out.push_back(d);
      if (!peek(')')) expect(',');
    }
    expect(')');
    return out;
  }

  std::string_view s_;
  std::string_view what_;
  size_t pos_ = 0;
};

}  // namespace

Array parse_npy(std::string_view bytes, std::string_view what) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != "\x93NUMPY") fail("{} is not an .npy array: the magic is wrong", what);
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3) fail("{} is .npy version {}.{} (1.0, 2.0 and 3.0 are read)", what, major, int(bytes[7]));
  const size_t length_size = major == 1 ? 2 : 4;
  const uint64_t header_size = load_le(bytes.data() + 8, length_size);
  const size_t data_start = 8 + length_size + header_size;
  if (8 + length_size > bytes.size() || header_size > bytes.size() - 8 - length_size)
    fail("{} is truncated: its .npy header runs past its end", what);
  const NpyHeader h = HeaderParser(bytes.substr(8 + length_size, header_size), what).parse();

  const std::string& d = *h.descr;
  static constexpr std::pair<std::string_view, ElementType> kTypes[] = {
      {"f8", ElementType::f64}, {"f4", ElementType::f32}, {"f2", ElementType::f16}, {"i8", ElementType::i64},
      {"i4", ElementType::i32}, {"i2", ElementType::i16}, {"i1", ElementType::i8},  {"u1", ElementType::u8},
      {"b1", ElementType::boolean}};
  std::optional<ElementType> type;
  if (d.size() == 3 && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '='))
    for (const auto& [code, t] : kTypes)
      if (code == std::string_view(d).substr(1)) type = t;
  if (!type) fail("{} has element type '{}', which is not read (f8 f4 f2 i8 i4 i2 i1 u1 b1 are)", what, printable(d));

  const size_t width = element_size(*type);
  const std::string_view data = bytes.substr(data_start);
  // (The limit only keeps the product from overflowing: the byte count is
  // compared with the data below, for a message that says which is short.)
  const int64_t n = checked_numel(*h.shape, width, uint64_t{1} << 62, what);
  if (static_cast<uint64_t>(n) * width != data.size())
    fail("{} holds {} bytes of data, but its shape ({}) of {} needs {}{}", what, data.size(), fmt::join(*h.shape, ", "),
         element_name(*type), static_cast<uint64_t>(n) * width,
         data.size() < static_cast<uint64_t>(n) * width ? " (is it truncated?)" : "");
  Array out;
  if (*h.fortran_order) {
    // Column-major: the first index varies fastest.
    std::vector<int64_t> strides(h.shape->size());
    int64_t stride = 1;
    for (size_t k = 0; k < strides.size(); ++k) {
      strides[k] = stride;
      stride *= (*h.shape)[k];
    }
    out = gather(*type, data, 0, *h.shape, strides, data.size(), what);
  } else {
    out.type = *type;
    out.shape = *h.shape;
    out.data.assign(data);
  }
  if (d[0] == '>') swap_bytes(out.data, width);
  return out;
}

std::vector<NamedArray> read_npz(const std::string& path) { return parse_npz(read_file(path), path); }

std::vector<NamedArray> parse_npz(std::string bytes, const std::string& origin) {
  if (!looks_like_zip(bytes)) fail("{} is not an .npz archive (it is not a ZIP file)", origin);
  const ZipReader zip(std::move(bytes), origin);
  std::vector<NamedArray> out;
  for (const ZipEntry& e : zip.entries()) {
    if (!e.name.empty() && e.name.back() == '/') continue;  // a folder
    const std::string_view name = e.name;
    if (name.size() < 4 || name.substr(name.size() - 4) != ".npy")
      fail("{} holds '{}', which is not an .npy array", origin, printable(name));
    NamedArray a{std::string(name.substr(0, name.size() - 4)), {}};
    a.array = parse_npy(zip.read(e), fmt::format("{}: '{}'", origin, printable(a.name)));
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace tfm::io
