// How tfm-train reports: the live line or plain periodic lines of every
// program (libcore/base/progress.h), and --log FILE, one JSON object a line,
// appended, for plots (tfm-train plot).
#pragma once

#include <string>

#include "libcore/base/json.h"
#include "libcore/base/progress.h"

namespace tfm::train {

// --log FILE: appended to, one record a line, each written whole.
class JsonLog {
 public:
  JsonLog() = default;
  explicit JsonLog(const std::string& path);
  ~JsonLog();
  JsonLog(const JsonLog&) = delete;
  JsonLog& operator=(const JsonLog&) = delete;

  bool open() const { return fd_ >= 0; }
  void write(const JsonWriter& record);

 private:
  std::string path_;
  int fd_ = -1;
};

// Resident memory of this process (Linux /proc), in bytes; 0 when unknown.
size_t resident_bytes();

}  // namespace tfm::train
