#include "libcore/base/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "libcore/base/error.h"
#include "libcore/base/log.h"

namespace tfm {

Progress::Mode Progress::mode_for(bool quiet) {
  if (quiet) return Mode::quiet;
  return isatty(STDERR_FILENO) == 1 ? Mode::live : Mode::lines;
}

double Progress::interval() {
  const char* env = std::getenv("TFM_PROGRESS_INTERVAL");
  if (env == nullptr || *env == '\0') return 30;
  char* end = nullptr;
  const double s = std::strtod(env, &end);
  TFM_REQUIRE(*end == '\0' && std::isfinite(s) && s >= 0,
              "TFM_PROGRESS_INTERVAL must be a number of seconds >= 0, got '{}'", env);
  return s;
}

Progress::Progress(Mode mode)
    : mode_(mode), interval_(mode == Mode::lines ? interval() : 0), start_(Clock::now()),
      last_(start_) {}

double Progress::seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

bool Progress::due() const {
  const double since = std::chrono::duration<double>(Clock::now() - last_).count();
  switch (mode_) {
    case Mode::quiet: return false;
    case Mode::live: return !shown_ || since >= 0.2;
    case Mode::lines: return since >= interval_;
  }
  return false;
}

void Progress::report(const std::string& text, bool force) {
  if (quiet() || (!force && !due())) return;
  last_ = Clock::now();
  if (live()) {
    log::show_live(text);
    shown_ = true;
  } else {
    log::info("{}", text);
  }
}

void Progress::status(const std::string& text, bool force) {
  if (!live() || (!force && !due())) return;
  last_ = Clock::now();
  log::show_live(text);
  shown_ = true;
}

void Progress::line(const std::string& text) {
  if (!quiet()) log::info("{}", text);
}

void Progress::end_live() {
  if (!shown_) return;
  log::clear_live();
  shown_ = false;
}

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 86400) return fmt::format("{}d{:02}h", s / 86400, s % 86400 / 3600);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

double eta_seconds(double done, double total, double seconds) {
  if (!(done > 0) || !(total > 0) || !std::isfinite(seconds)) return -1;
  return seconds * std::max(0.0, total - done) / done;
}

std::string format_size(double bytes) {
  if (bytes >= 1e9) return fmt::format("{:.1f} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.1f} MB", bytes / 1e6);
  if (bytes >= 1e3) return fmt::format("{:.0f} kB", bytes / 1e3);
  return fmt::format("{:.0f} B", bytes);
}

std::string reading_text(std::string_view what, int64_t lines, int64_t bytes, int64_t size,
                         double seconds) {
  const double rate = seconds > 0 ? static_cast<double>(bytes) / seconds : 0;
  if (size < 0)
    return fmt::format("{}: {} lines, {} | {}/s", what, lines, format_size(static_cast<double>(bytes)),
                       format_size(rate));
  const double share = size > 0 ? static_cast<double>(bytes) / static_cast<double>(size) : 1;
  return fmt::format("{}: {} lines, {} of {} ({:.0f}%) | {}/s | ETA {}", what, lines,
                     format_size(static_cast<double>(bytes)), format_size(static_cast<double>(size)),
                     100 * std::min(1.0, share), format_size(rate),
                     format_eta(eta_seconds(static_cast<double>(bytes), static_cast<double>(size), seconds)));
}

}  // namespace tfm
