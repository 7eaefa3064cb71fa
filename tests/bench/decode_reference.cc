#include "tests/bench/decode_reference.h"

#include <sys/resource.h>
#include <sys/wait.h>

#include <cstdio>

#include "libcore/base/error.h"

namespace tfm::bench {

constexpr int kNoModule = 4;  // the reference's exit status without its module

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::string run_reference(const std::string& command, const std::string& python, const std::string& what,
                          const std::string& skip_hint) {
  return run_reference_lines(command, python, what, skip_hint).back();
}

std::vector<std::string> run_reference_lines(const std::string& command, const std::string& python,
                                             const std::string& what, const std::string& skip_hint) {
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) fail("cannot start {}", python);
  std::vector<std::string> results;
  std::string no_module;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe)) {
    std::string text(line);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    if (text.rfind("NO_TORCH ", 0) == 0) no_module = text.substr(9);
    if (text.rfind("NO_MODULE ", 0) == 0) no_module = text.substr(10);
    if (text.rfind("RESULT ", 0) == 0) results.push_back(text.substr(7));
  }
  const int status = pclose(pipe);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == kNoModule || !no_module.empty())
    fail("{} cannot be imported by {} ({}); {}", what, python,
         no_module.empty() ? "no reason given" : no_module, skip_hint);
  if (code != 0 || results.empty())
    fail("the {} reference failed (exit status {}): {}", what, code, command.substr(0, 200));
  return results;
}

}  // namespace tfm::bench
