// Internal to the checkpoint code; not part of the libcore API. The byte
// layout (man/tfm.7, "CHECKPOINT FORMAT") is shared by checkpoint_write.cc and
// checkpoint_read.cc: this header holds it once so that the two halves cannot
// drift apart. Include libcore/io/checkpoint.h for the public interface.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "libcore/base/dtype.h"
#include "libcore/io/checkpoint.h"
#include "libcore/io/crc32.h"

namespace tfm::io::detail {

inline constexpr std::array<unsigned char, 8> kMagic = {0x89, 'T', 'F', 'M', 'C', 'K', 'P', 'T'};
inline constexpr size_t kHeaderBytes = 64;
inline constexpr size_t kChunk = size_t{1} << 20;  // read and compress in 1 MiB pieces
inline constexpr uint64_t kTensorAlign = 64;       // tensor offsets in the decompressed data
inline constexpr uint64_t kZstdMaxRatio = 32768;   // 128 KiB block from >= 4 stored bytes
inline constexpr uint64_t kTrustedCapacity = uint64_t{64} << 20;
inline constexpr uint16_t kCodecStored = 0, kCodecZstd = 1;
inline constexpr size_t kMaxName = 65535;
inline constexpr std::array<std::string_view, 4> kReserved = {"config", "tokenizer",
                                                              "tensor_table", "tensors"};

// ---- CRC-32 (libcore/io/crc32.h) ----

using ::tfm::io::crc32;

// ---- little-endian encoding ----

template <typename T>
void put(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((uint64_t{v} >> (8 * i)) & 0xff));
}
inline void put_name(std::string& out, std::string_view name) {
  put<uint16_t>(out, static_cast<uint16_t>(name.size()));
  out.append(name);
}
template <typename T>
T get(const unsigned char* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t{p[i]} << (8 * i);
  return static_cast<T>(v);
}

// ---- dtype codes in the tensor table ----

inline std::optional<DType> dtype_from_code(uint8_t code) {
  switch (code) {
    case 0: return DType::f32;
    case 1: return DType::f64;
    case 2: return DType::bf16;
    case 3: return DType::f16;
    case 4: return DType::i32;
    default: return std::nullopt;
  }
}
inline uint8_t dtype_code(DType t) {
  switch (t) {
    case DType::f32: return 0;
    case DType::f64: return 1;
    case DType::bf16: return 2;
    case DType::f16: return 3;
    case DType::i32: return 4;
  }
  return 255;
}

inline bool is_reserved(std::string_view name) {
  return std::find(kReserved.begin(), kReserved.end(), name) != kReserved.end();
}

// One entry of the section directory.
struct Section {
  std::string name;
  SectionKind kind = SectionKind::extra;
  uint16_t codec = kCodecZstd;
  uint64_t offset = 0, stored = 0, raw = 0;
  uint32_t crc_stored = 0, crc_raw = 0;
};

}  // namespace tfm::io::detail
