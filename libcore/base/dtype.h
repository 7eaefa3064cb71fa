// Element types. f32 is the CPU's math type and the GPU's accumulation type;
// bf16 and f16 are GPU storage types for tensor-core math; f64 exists so that
// tests run the CPU ops in double as a reference; i32 holds token ids.
//
// tfm::bf16 and tfm::f16 are 16-bit host-side storage types with
// round-to-nearest-even conversion from float, bit-compatible with CUDA's
// __nv_bfloat16 and __half, so host code can fill and read GPU tensors.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace tfm {

enum class DType : uint8_t { f32, f64, bf16, f16, i32 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f64: return 8;
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: return 2;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
  }
  return "?";
}

struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN stays a quiet NaN
      bits = static_cast<uint16_t>((u >> 16) | 0x40);
      return;
    }
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
    bits = static_cast<uint16_t>(u >> 16);
  }
  explicit operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float f);  // round to nearest even, overflow to inf
  explicit operator float() const;
};

template <typename T> struct dtype_of_t;
template <> struct dtype_of_t<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of_t<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of_t<bf16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of_t<f16> { static constexpr DType value = DType::f16; };
template <> struct dtype_of_t<int32_t> { static constexpr DType value = DType::i32; };
template <typename T> inline constexpr DType dtype_of = dtype_of_t<T>::value;

}  // namespace tfm
