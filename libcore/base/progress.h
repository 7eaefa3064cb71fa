// How every long job reports while it runs (docs/architecture.md,
// "Conventions of every program"): the one facility of tfm-train,
// tfm-decode, tfm-tok, tfm-batch, tfm-avgckpt and tfm-score -m.
//
//   terminal (stderr a tty)  one status line redrawn in place, at most 5
//                            times a second, erased when the job ends; what
//                            the program logs meanwhile goes above it
//   otherwise                a plain line "PROGRAM: TEXT" when the interval
//                            has passed since the start or the last line:
//                            30 s, or TFM_PROGRESS_INTERVAL seconds (a
//                            decimal number; 0: at every report)
//   -q                       nothing
//
// A job that ends within the interval prints no progress line at all, so a
// short run's stderr is only its summary. tfm-train keeps a cadence of its
// own for the plain lines (--log-every updates) through status() and line().
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace tfm {

class Progress {
 public:
  enum class Mode { quiet, lines, live };
  // live when stderr is a terminal, lines otherwise, quiet with -q.
  static Mode mode_for(bool quiet);
  // The plain lines' cadence in seconds: TFM_PROGRESS_INTERVAL, else 30.
  // Error for a value that is not a number >= 0.
  static double interval();

  explicit Progress(Mode mode);
  explicit Progress(bool quiet) : Progress(mode_for(quiet)) {}
  ~Progress() { end_live(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  bool live() const { return mode_ == Mode::live; }
  bool quiet() const { return mode_ == Mode::quiet; }
  // Seconds since the job started (construction).
  double seconds() const;

  // True when report() would show something now: callers build the text
  // only then.
  bool due() const;
  // The live line, or a plain line when one is due; `force`: now.
  void report(const std::string& text, bool force = false);
  // tfm-train: the live line alone (nothing in the other modes); `force`
  // redraws it now, else at most 5 times a second.
  void status(const std::string& text, bool force = false);
  // A permanent line (log level info) above the live line; nothing with -q.
  void line(const std::string& text);
  // Erases the live line, so that what follows starts on a clean line.
  void end_live();

 private:
  using Clock = std::chrono::steady_clock;
  Mode mode_;
  double interval_;
  Clock::time_point start_, last_;
  bool shown_ = false;
};

// "1h02m", "3m05s", "42s"; "-" for a negative or unknown time.
std::string format_eta(double seconds);
// The time left when `done` of `total` took `seconds` at a steady pace;
// -1 when it cannot be told (nothing done yet, no total).
double eta_seconds(double done, double total, double seconds);
// "12.3 MB", "850 kB", "512 B" (decimal units, as rates are read).
std::string format_size(double bytes);
// The progress of reading an input, `bytes` into it after `seconds`:
// "WHAT: 120000 lines, 9.1 MB of 24.0 MB (38%) | 3.0 MB/s | ETA 5s", or
// without "of ..." and the ETA when its size is unknown (size < 0: a pipe).
std::string reading_text(std::string_view what, int64_t lines, int64_t bytes, int64_t size,
                         double seconds);

}  // namespace tfm
