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

// Why `x` (written `got`) is outside [lo, hi]: "must be at least 1, got 0",
// "must be between 1 and 19, got 20". A bound at the type's limit or past
// 1e15 in size is a limit of the representation, not of the meaning, and is
// said only to a value beyond it.
template <typename T>
std::string out_of_range(T lo, T hi, T x, std::string_view got) {
  constexpr double kUnsaid = 1e15;
  const bool say_lo = lo > std::numeric_limits<T>::lowest() && static_cast<double>(lo) > -kUnsaid;
  const bool say_hi = hi < std::numeric_limits<T>::max() && static_cast<double>(hi) < kUnsaid;
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
  constexpr double kUnsaid = 1e15;
  const bool say_hi = hi < std::numeric_limits<T>::max() && static_cast<double>(hi) < kUnsaid;
  return say_hi ? fmt::format("{} to {}", plain_number(lo), plain_number(hi)) : ">= " + plain_number(lo);
}

}  // namespace tfm
