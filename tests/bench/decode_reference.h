// A benchmark's reference implementation (a PyTorch script run by Debian's
// /usr/bin/python3, or CTranslate2 run by the project's .venv) as a child
// process, for the benchmarks that compare tfm against one in the same run
// (model, decode).
//
// A reference prints a line "RESULT key=value ..." on stdout (one a
// setting where it runs several); when its
// module cannot be imported it prints "NO_TORCH <reason>" or "NO_MODULE
// <reason>" and exits 4.
#pragma once

#include <string>
#include <vector>

namespace tfm::bench {

// Runs `command`; returns its RESULT line without "RESULT ". Throws Error
// when the reference cannot import its module (naming `python` and `what`,
// the reference's name: "PyTorch", "CTranslate2"), fails, or prints no
// RESULT line. `skip_hint` tells how to run without it.
std::string run_reference(const std::string& command, const std::string& python,
                          const std::string& what = "PyTorch",
                          const std::string& skip_hint = "--no-reference times tfm alone");
// The same, every RESULT line in the order printed.
std::vector<std::string> run_reference_lines(const std::string& command, const std::string& python,
                                             const std::string& what, const std::string& skip_hint);

// User + system seconds this process has used so far, all threads.
double cpu_seconds();

}  // namespace tfm::bench
