// How tfm-train reports: on a terminal a live status line redrawn in place,
// otherwise plain periodic lines (DESIGN.md, "Conventions"); and --log FILE,
// one JSON object a line, appended, for plots.
#pragma once

#include <chrono>
#include <string>

#include "libcore/json.h"

namespace tfm::train {

class Progress {
 public:
  // live: redraw a status line in place (stderr is a terminal). quiet: -q.
  Progress(bool live, bool quiet) : live_(live && !quiet), quiet_(quiet) {}
  ~Progress() { end_live(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  bool live() const { return live_; }
  // The live line: at most a few redraws a second (`force` redraws now); a
  // text skipped for that is drawn when the line ends.
  void status(const std::string& text, bool force = false);
  // A permanent line through the log (info level), below the live line.
  void line(const std::string& text);
  // Ends the live line so that what follows starts on a line of its own.
  void end_live();

 private:
  void draw();

  bool live_, quiet_;
  bool shown_ = false;
  std::string last_, pending_;
  std::chrono::steady_clock::time_point drawn_{};
};

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

// "1h02m", "3m05s", "42s"
std::string format_eta(double seconds);
// Resident memory of this process (Linux /proc), in bytes; 0 when unknown.
size_t resident_bytes();

}  // namespace tfm::train
