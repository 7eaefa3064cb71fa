// Logging to stderr with levels. Every line is prefixed by the program name
// ("tfm-train: ..."), so output from a pipeline of tfm programs stays legible.
// -q sets Level::warn, -v sets Level::debug; the default is Level::info.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace tfm::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3, quiet = 4 };

void set_program(std::string_view name);  // "tfm-train"
std::string_view program();
void set_level(Level level);
Level level();
bool enabled(Level level);

// Writes "PROGRAM: [LEVEL: ]MESSAGE\n" to stderr in one write (lines from
// threads never interleave). While a live line is shown it is erased first
// and drawn again below the message, in the same write.
void write(Level level, std::string_view message);

// The live status line of a long job on a terminal (libcore/base/progress.h):
// "\rPROGRAM: TEXT" drawn in place, kept below what write() prints, until
// clear_live() erases it.
void show_live(std::string_view text);
void clear_live();

template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... a) {
  if (enabled(Level::debug)) write(Level::debug, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... a) {
  if (enabled(Level::info)) write(Level::info, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... a) {
  if (enabled(Level::warn)) write(Level::warn, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... a) {
  write(Level::error, fmt::format(f, std::forward<Args>(a)...));
}

}  // namespace tfm::log
