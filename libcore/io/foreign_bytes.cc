#include "libcore/io/foreign_bytes.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "libcore/base/error.h"

namespace tfm::io {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  const char lower = static_cast<char>(c | 0x20);
  return lower >= 'a' && lower <= 'f' ? lower - 'a' + 10 : -1;
}

int escaped_char(char e, bool yaml) {
  switch (e) {
    case '"': case '\\': case '/': return e;
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: break;
  }
  if (!yaml) return -1;
  switch (e) {
    case '0': return '\0';
    case 'a': return '\a';
    case 'v': return '\v';
    case 'e': return '\x1b';
    case ' ': case '\t': return e;
    default: return -1;
  }
}

int64_t checked_numel(const std::vector<int64_t>& shape, size_t element_bytes, uint64_t limit,
                      std::string_view what) {
  uint64_t n = 1;
  bool empty = false;
  for (const int64_t d : shape) {
    if (d < 0) fail("{} has a negative dimension in its shape ({})", what, fmt::join(shape, ", "));
    empty = empty || d == 0;
  }
  if (empty) return 0;
  // Every partial product stays within the limit, so none overflows.
  for (const int64_t d : shape) {
    if (static_cast<uint64_t>(d) > limit / element_bytes / n)
      fail("{} has shape ({}), more bytes than the file can hold", what, fmt::join(shape, ", "));
    n *= static_cast<uint64_t>(d);
  }
  return static_cast<int64_t>(n);
}

void swap_bytes(std::string& data, size_t width) {
  if (width < 2) return;
  for (size_t i = 0; i + width <= data.size(); i += width) std::reverse(data.begin() + i, data.begin() + i + width);
}

Array gather(ElementType type, std::string_view storage, int64_t offset, const std::vector<int64_t>& shape,
             const std::vector<int64_t>& strides, uint64_t limit, std::string_view what) {
  const size_t width = element_size(type);
  if (strides.size() != shape.size())
    fail("{} has {} strides for a shape of rank {}", what, strides.size(), shape.size());
  Array out;
  out.type = type;
  out.shape = shape;
  const int64_t n = checked_numel(shape, width, limit, what);
  const int64_t available = static_cast<int64_t>(storage.size() / width);
  if (offset < 0) fail("{} starts at a negative offset ({})", what, offset);
  if (n == 0) return out;
  // The last element read, offset + sum((d - 1) * stride), must lie inside
  // the storage; with non-negative strides every other one then does too.
  // (Each step is checked before it is added, so nothing overflows.)
  int64_t last = offset;
  for (size_t k = 0; k < shape.size() && last < available; ++k) {
    if (strides[k] < 0) fail("{} has a negative stride ({})", what, strides[k]);
    if (strides[k] > 0 && shape[k] - 1 > (available - 1 - last) / strides[k]) last = available;
    else last += (shape[k] - 1) * strides[k];
  }
  if (last >= available)
    fail("{} reads past the end of its storage ({} elements from offset {} with strides ({}))", what,
         available, offset, fmt::join(strides, ", "));
  out.data.resize(static_cast<size_t>(n) * width);
  // An odometer over the index, the innermost dimension copied as a run
  // when it is contiguous.
  const size_t rank = shape.size();
  std::vector<int64_t> index(rank, 0);
  const int64_t inner = rank == 0 ? 1 : shape[rank - 1];
  const int64_t inner_stride = rank == 0 ? 1 : strides[rank - 1];
  char* to = out.data.data();
  for (int64_t done = 0; done < n; done += inner) {
    int64_t at = offset;
    for (size_t k = 0; k + 1 < rank; ++k) at += index[k] * strides[k];
    if (inner_stride == 1) {
      std::memcpy(to, storage.data() + at * width, static_cast<size_t>(inner) * width);
      to += inner * width;
    } else {
      for (int64_t i = 0; i < inner; ++i, to += width)
        std::memcpy(to, storage.data() + (at + i * inner_stride) * width, width);
    }
    for (size_t k = rank > 0 ? rank - 1 : 0; k-- > 0;) {
      if (++index[k] < shape[k]) break;
      index[k] = 0;
    }
  }
  return out;
}

}  // namespace tfm::io
