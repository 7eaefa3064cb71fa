// Helpers the foreign-file readers share (JSON, YAML, safetensors, npz,
// torch.save): little-endian loads, UTF-8 encoding, checked element
// counts, byte swapping and strided gathers into C-order arrays.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/io/value.h"

namespace tfm::io {

// The unsigned little-endian integer of `n` (<= 8) bytes at `p`.
inline uint64_t load_le(const char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

// The value of hex digit `c`, or -1.
int hex_digit(char c);
// The character that backslash-`e` stands for in a JSON string (\" \\ \/
// \b \f \n \r \t) or, with `yaml`, also in a YAML double-quoted one
// (\0 \a \v \e \<space> \<tab>); -1 for any other `e`.
int escaped_char(char e, bool yaml);

// The number of elements of `shape`, checked: no negative dimension, and
// the byte count (times `element_bytes`) at most `limit`. `what` starts
// the message ("model.npz: 'w'").
int64_t checked_numel(const std::vector<int64_t>& shape, size_t element_bytes, uint64_t limit,
                      std::string_view what);

// Reverses the byte order of every `width`-byte element of `data`.
void swap_bytes(std::string& data, size_t width);

// The array of `shape` whose element (i0, i1, ...) is element
// offset + sum(ik * strides[k]) of `storage` (elements of `type`), copied
// into C order. Every element read is checked to lie inside the storage,
// and the result's bytes to be at most `limit`; `what` names the tensor
// for the messages.
Array gather(ElementType type, std::string_view storage, int64_t offset, const std::vector<int64_t>& shape,
             const std::vector<int64_t>& strides, uint64_t limit, std::string_view what);

}  // namespace tfm::io
