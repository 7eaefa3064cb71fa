// The one rule for saying a number's allowed range, shared by every
// program's options (app.h's AtLeast and Range) and the key = value readers
// (io/key_value.h): "--last must be at least 1, got 0", "layers must be
// between 1 and 1024, got 0"; never "between 0 and 1797..." (309 digits).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

namespace tfm {

// `x` as a person writes it: 1048576, 0.5, 1e-09; whole doubles without ".0".
template <typename T>
std::string plain_number(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 1e15) return fmt::format("{:.0f}", x);
  }
  return fmt::format("{}", x);
}

// Whether a bound is said: one at the type's limit or past 1e15 in size is
// a limit of the representation, not of the meaning.
template <typename T>
bool said_bound(T bound) {
  constexpr double kUnsaid = 1e15;
  return bound > std::numeric_limits<T>::lowest() && bound < std::numeric_limits<T>::max() &&
         std::fabs(static_cast<double>(bound)) < kUnsaid;
}

// Why `x` (written `got`) is outside [lo, hi]: "must be at least 1, got 0",
// "must be between 1 and 19, got 20". An unsaid bound (said_bound) is said
// only to a value beyond it.
template <typename T>
std::string out_of_range(T lo, T hi, T x, std::string_view got) {
  const bool say_lo = said_bound(lo), say_hi = said_bound(hi);
  std::string rule;
  if (say_lo && say_hi)
    rule = fmt::format("between {} and {}", plain_number(lo), plain_number(hi));
  else if (x > hi)
    rule = "at most " + plain_number(hi);
  else if (x < lo || say_lo)
    rule = "at least " + plain_number(lo);
  else
    rule = "at most " + plain_number(hi);
  return fmt::format("must be {}, got {}", rule, got);
}

// The same rule for help text: "1 to 19", ">= 1".
template <typename T>
std::string range_text(T lo, T hi) {
  return said_bound(hi) ? fmt::format("{} to {}", plain_number(lo), plain_number(hi)) : ">= " + plain_number(lo);
}

}  // namespace tfm
