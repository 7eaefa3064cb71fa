#include "libcore/log.h"

#include <unistd.h>

#include <atomic>
#include <string>

namespace tfm::log {
namespace {
std::string g_program = "tfm";
std::atomic<Level> g_level{Level::info};
}  // namespace

void set_program(std::string_view name) { g_program = name; }
std::string_view program() { return g_program; }
void set_level(Level l) { g_level = l; }
Level level() { return g_level; }
bool enabled(Level l) { return l >= g_level.load(); }

void write(Level l, std::string_view message) {
  std::string line = g_program + ": ";
  if (l == Level::warn) line += "warning: ";
  if (l == Level::error) line += "error: ";
  if (l == Level::debug) line += "debug: ";
  // One line whatever the message holds: a control character in it (a
  // newline in a name read from a file) is written as an escape.
  for (const char c : message) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t') {
      line += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      line += c;
    }
  }
  line += '\n';
  // One write(2) per line: atomic for pipes up to PIPE_BUF, never interleaved
  // within a line by stdio buffering.
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace tfm::log
