#include "libcore/io/safetensors.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "libcore/base/error.h"
#include "libcore/io/foreign_bytes.h"
#include "libcore/io/json_read.h"
#include "libcore/io/read_file.h"

namespace tfm::io {

namespace {

std::optional<ElementType> safetensors_type(std::string_view name) {
  static constexpr std::pair<std::string_view, ElementType> kNames[] = {
      {"F64", ElementType::f64}, {"F32", ElementType::f32}, {"F16", ElementType::f16},
      {"BF16", ElementType::bf16}, {"I64", ElementType::i64}, {"I32", ElementType::i32},
      {"I16", ElementType::i16}, {"I8", ElementType::i8}, {"U8", ElementType::u8},
      {"BOOL", ElementType::boolean}};
  for (const auto& [n, t] : kNames)
    if (n == name) return t;
  return std::nullopt;
}

// The header's limit in the safetensors library: more is not a header.
constexpr uint64_t kMaxHeader = 100u << 20;

}  // namespace

Safetensors read_safetensors(const std::string& path) { return parse_safetensors(read_file(path), path); }

Safetensors parse_safetensors(std::string_view bytes, const std::string& origin) {
  if (bytes.size() < 8) fail("{} is not a safetensors file: it is shorter than the 8-byte header length", origin);
  const uint64_t header_size = load_le(bytes.data(), 8);
  if (header_size > bytes.size() - 8)
    fail("{} is truncated or not a safetensors file: its header length ({} bytes) exceeds the file ({} bytes)",
         origin, header_size, bytes.size());
  if (header_size > kMaxHeader) fail("{}: the header length ({} bytes) is over 100 MiB", origin, header_size);
  const std::string_view header = bytes.substr(8, header_size);
  const std::string_view data = bytes.substr(8 + header_size);
  if (header.empty() || header.front() != '{') fail("{} is not a safetensors file: its header is not a JSON object", origin);
  Value json;
  try {
    json = parse_json(header, origin);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: the header is not valid JSON: {}", origin, e.what()), e.where());
  }

  Safetensors out;
  struct Span {
    uint64_t begin, end;
    size_t tensor;
  };
  std::vector<Span> spans;
  for (const auto& [key, entry] : json.as_dict()) {
    const std::string& name = key.as_string();
    if (name == "__metadata__") {
      if (!entry.is(Value::Kind::dict)) fail("{}: __metadata__ must be a dict, got {}", origin, entry.kind_name());
      for (const auto& member : entry.as_dict()) member.second.as_string();  // strings only, or an Error naming the key
      out.metadata = entry;
      continue;
    }
    const std::string what = fmt::format("{}: tensor '{}'", origin, printable(name));
    if (!entry.is(Value::Kind::dict)) fail("{} must be described by a dict, got {}", what, entry.kind_name());
    const std::string& dtype = entry["dtype"].as_string();
    const auto type = safetensors_type(dtype);
    if (!type) fail("{} has an unknown dtype '{}' (F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL are read)", what, printable(dtype));
    NamedArray t{name, {}};
    t.array.type = *type;
    for (const Value& d : entry["shape"].items()) t.array.shape.push_back(d.as_int());
    const Value& offsets = entry["data_offsets"];
    if (offsets.size() != 2) fail("{}: data_offsets must be [BEGIN, END], got {} numbers", what, offsets.size());
    const int64_t begin = offsets.at(0).as_int(), end = offsets.at(1).as_int();
    if (begin < 0 || end < begin || static_cast<uint64_t>(end) > data.size())
      fail("{} has data_offsets [{}, {}] outside the {} bytes of data{}", what, begin, end, data.size(),
           static_cast<uint64_t>(end) > data.size() ? " (is the file truncated?)" : "");
    const size_t width = element_size(*type);
    const int64_t n = checked_numel(t.array.shape, width, uint64_t{1} << 62, what);  // compared below
    if (static_cast<uint64_t>(n) * width != static_cast<uint64_t>(end - begin))
      fail("{} has shape ({}) of {}: {} bytes, but its data_offsets span {}", what, fmt::join(t.array.shape, ", "),
           dtype, static_cast<uint64_t>(n) * width, end - begin);
    spans.push_back({static_cast<uint64_t>(begin), static_cast<uint64_t>(end), out.tensors.size()});
    out.tensors.push_back(std::move(t));
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].begin < spans[i - 1].end)
      fail("{}: tensors '{}' and '{}' overlap in the data", origin, printable(out.tensors[spans[i - 1].tensor].name),
           printable(out.tensors[spans[i].tensor].name));
  for (const Span& s : spans) out.tensors[s.tensor].array.data.assign(data.substr(s.begin, s.end - s.begin));
  return out;
}

}  // namespace tfm::io
