// tfm::Error: the one exception the library throws at a user.
//
// The message is a sentence written for the person at the shell ("gemm: A is
// (7, 5) but op(A) needs 5 columns ..."), never assertion text. Only a
// program's main catches it (see app.h), prints `tfm-NAME: error: WHAT` and
// exits 1. `where` names the user's input position (FILE:LINE) when there is
// one; it is printed in parentheses after the message.
//
// fail() and TFM_REQUIRE format with fmt, which nvcc's front end cannot
// compile (fmt 9's constexpr machinery); CUDA files (.cu) see only the Error
// class and build their messages from std::string.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#if !defined(__CUDACC__)
#include <fmt/format.h>
#endif

namespace tfm {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string what, std::string where = {})
      : std::runtime_error(std::move(what)), where_(std::move(where)) {}

  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

// An Error already told to the user elsewhere (another process of the run
// said it): main exits 1 without a line of its own.
class ReportedError : public Error {
 public:
  using Error::Error;
};

// A bad option value found after parsing (it needed a file to judge):
// main prints it as a usage error and exits 2 (app.h).
class UsageError : public Error {
 public:
  using Error::Error;
};

// Text from a file (a section or tensor name, a fingerprint, a key) made
// safe to echo in a message: control characters, backslashes and bytes that
// are not UTF-8 become \xNN escapes, so a name can neither split the error
// line nor garble the terminal.
inline std::string printable(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const auto escape = [&](unsigned char c) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f || c == '\\') escape(c); else out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence (no overlongs, no surrogates) is kept whole.
    const size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (ok && n >= 3) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0) && !(c == 0xf0 && c1 < 0x90) &&
           !(c == 0xf4 && c1 >= 0x90);
    }
    if (!ok) {
      escape(c);
      ++i;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

// What `open()` returns, made by the first call (thread-safe) and kept for
// the process; when `open` threw an Error, every call throws it again. For
// what is opened at its first use: a library (cuBLAS, NCCL) and its
// functions. Each call site's lambda is a type of its own, with its value.
template <typename Open>
const auto& once_or_error(Open open) {
  struct Opened {
    decltype(open()) value{};
    std::string error;
  };
  static const Opened opened = [&] {
    Opened o;
    try {
      o.value = open();
    } catch (const Error& e) {
      o.error = e.what();
    }
    return o;
  }();
  if (!opened.error.empty()) throw Error(opened.error);
  return opened.value;
}

#if !defined(__CUDACC__)
// Throws Error(fmt::format(...)). For checks on user-visible arguments:
//   TFM_REQUIRE(a.rank() == 2, "gemm: A must be a matrix, got rank {}", a.rank());
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

#endif  // !__CUDACC__

}  // namespace tfm

#if !defined(__CUDACC__)
#define TFM_REQUIRE(cond, ...)             \
  do {                                     \
    if (!(cond)) ::tfm::fail(__VA_ARGS__); \
  } while (0)
#endif
