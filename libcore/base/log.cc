#include "libcore/base/log.h"

#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>

namespace tfm::log {
namespace {
std::string g_program = "tfm";
std::atomic<Level> g_level{Level::info};
std::mutex g_stderr;    // one writer of stderr at a time, for the live line
std::string g_live;     // the live line as drawn ("\rPROGRAM: TEXT\x1b[K"); empty: none

// Every byte of `text` to stderr (a short write continues; an error drops the rest).
void put(std::string_view text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}
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
  std::lock_guard lock(g_stderr);
  if (!g_live.empty()) line = "\r\x1b[K" + line + g_live;
  put(line);
}

void show_live(std::string_view text) {
  std::lock_guard lock(g_stderr);
  g_live = "\r" + g_program + ": ";
  g_live += text;
  g_live += "\x1b[K";
  put(g_live);
}

void clear_live() {
  std::lock_guard lock(g_stderr);
  if (g_live.empty()) return;
  g_live.clear();
  put("\r\x1b[K");
}

}  // namespace tfm::log
