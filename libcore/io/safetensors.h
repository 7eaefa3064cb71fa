// Reading safetensors files (Hugging Face's model.safetensors): an 8-byte
// little-endian header length N, N bytes of JSON
//   {"NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]},
//    ..., "__metadata__": {"KEY": "VALUE", ...}}
// then the data, offsets counted from its start, little-endian, C order.
//
// Everything is checked before an array is made: the header length against
// the file, the JSON, the dtype names (F64 F32 F16 BF16 I64 I32 I16 I8 U8
// BOOL), shape products against byte counts, offsets inside the data and
// no two tensors overlapping. Any failure is one Error naming the file.
#pragma once

#include <string>
#include <vector>

#include "libcore/io/value.h"

namespace tfm::io {

struct Safetensors {
  std::vector<NamedArray> tensors;  // in header order
  Value metadata;                   // the __metadata__ dict, or null
};

Safetensors read_safetensors(const std::string& path);
// The same from the file's bytes; `origin` names it in messages.
Safetensors parse_safetensors(std::string_view bytes, const std::string& origin);

}  // namespace tfm::io
