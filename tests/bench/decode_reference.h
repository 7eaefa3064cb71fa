// A benchmark's reference implementation (a PyTorch script run by Debian's
// /usr/bin/python3) as a child process, for the benchmarks that compare
// tfm against one in the same run (model, decode).
//
// A reference prints one line "RESULT key=value ..." on stdout; when torch
// cannot be imported it prints "NO_TORCH <reason>" and exits 4.
#pragma once

#include <string>

namespace tfm::bench {

// Runs `command`; returns its RESULT line without "RESULT ". Throws Error
// when the reference cannot import torch (naming `python`), fails, or
// prints no RESULT line.
std::string run_reference(const std::string& command, const std::string& python);

// User + system seconds this process has used so far, all threads.
double cpu_seconds();

}  // namespace tfm::bench
