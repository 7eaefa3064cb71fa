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
