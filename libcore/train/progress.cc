#include "libcore/train/progress.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "libcore/error.h"
#include "libcore/log.h"

namespace tfm::train {

void Progress::status(const std::string& text, bool force) {
  if (!live_) return;
  const auto now = std::chrono::steady_clock::now();
  pending_ = text;
  if (!force && shown_ && now - drawn_ < std::chrono::milliseconds(200)) return;
  drawn_ = now;
  draw();
}

void Progress::draw() {
  last_ = fmt::format("\r{}: {}\x1b[K", log::program(), pending_);
  pending_.clear();
  std::fputs(last_.c_str(), stderr);
  std::fflush(stderr);
  shown_ = true;
}

void Progress::line(const std::string& text) {
  if (quiet_) return;
  if (shown_) {
    std::fputs("\r\x1b[K", stderr);
    std::fflush(stderr);
  }
  log::info("{}", text);
  if (shown_) {  // redraw below the new line
    std::fputs(last_.c_str(), stderr);
    std::fflush(stderr);
  }
}

void Progress::end_live() {
  if (!pending_.empty()) draw();
  if (!shown_) return;
  std::fputs("\n", stderr);
  std::fflush(stderr);
  shown_ = false;
}

JsonLog::JsonLog(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot write the log {}: {}", path, std::strerror(errno));
}

JsonLog::~JsonLog() {
  if (fd_ >= 0) ::close(fd_);
}

void JsonLog::write(const JsonWriter& record) {
  if (fd_ < 0) return;
  const std::string line = record.str() + "\n";
  // O_APPEND and one write(2) a record: a reader never sees half a line.
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write the log {}: {}", path_, std::strerror(n < 0 ? errno : ENOSPC));
    done += static_cast<size_t>(n);
  }
}

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 86400) return fmt::format("{}d{:02}h", s / 86400, s % 86400 / 3600);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace tfm::train
