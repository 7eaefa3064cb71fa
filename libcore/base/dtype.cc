#include "libcore/base/dtype.h"

#include <cmath>

namespace tfm {

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
f16::f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) {  // NaN
    bits = static_cast<uint16_t>(sign | 0x7e00u);
    return;
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: infinity
    bits = static_cast<uint16_t>(sign | 0x7c00u);
    return;
  }
  if (abs < 0x38800000u) {  // below 2^-14: subnormal half (or zero)
    // value = abs_float; half subnormal unit is 2^-24.
    float a;
    std::memcpy(&a, &abs, 4);
    const float scaled = a * 16777216.0f;  // exact: a power-of-two scale
    // nearbyint rounds half to even under the default rounding mode.
    bits = static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
    return;
  }
  // Normal: rebias exponent 127 -> 15 and round the 13 dropped mantissa bits.
  uint32_t h = abs - 0x38000000u;          // exponent - 112 in float position
  h += 0x0fffu + ((h >> 13) & 1u);         // round to nearest even
  bits = static_cast<uint16_t>(sign | (h >> 13));
}

f16::operator float() const {
  const uint32_t sign = (static_cast<uint32_t>(bits) & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  const uint32_t man = bits & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    const float f = std::ldexp(static_cast<float>(man), -24);
    std::memcpy(&u, &f, 4);
    u |= sign;
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace tfm
