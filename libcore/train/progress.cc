#include "libcore/train/progress.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "libcore/base/error.h"
#include "libcore/base/log.h"

namespace tfm::train {

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

size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace tfm::train
