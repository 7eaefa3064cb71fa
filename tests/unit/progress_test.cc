// The progress facility every long job shares (libcore/base/progress.h): the
// cadence of the plain lines, silence with -q, the live line drawn and
// erased, and the texts' numbers; tfm-train plot's curves (libcore/viz/curve.h).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "libcore/base/error.h"
#include "libcore/base/log.h"
#include "libcore/base/progress.h"
#include "libcore/io/atomic_file.h"
#include "libcore/viz/curve.h"
#include "tests/support.h"

using namespace tfm;

namespace {

// Runs `body` with stderr (fd 2) going to a file; returns what it wrote.
template <typename Body>
std::string capture_stderr(Body body) {
  test::TempDir dir;
  const std::string path = dir.file("stderr");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(fd, STDERR_FILENO);
  ::close(fd);
  try {
    body();
  } catch (...) {
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
    throw;
  }
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Sets an environment variable for the scope.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  const char* name_;
};

}  // namespace

TEST_CASE("progress: plain lines at the interval, never closer", "[progress]") {
  ScopedEnv env("TFM_PROGRESS_INTERVAL", "0.2");
  log::set_program("tfm-test");
  // Reports every 5 ms for 1.1 s, longer (at most 10 s) on a machine so
  // busy that fewer than 2 lines came.
  const std::string err = capture_stderr([&] {
    Progress p(Progress::Mode::lines);
    int shown = 0;
    while ((p.seconds() < 1.1 || shown < 2) && p.seconds() < 10) {
      if (p.due()) {  // as the programs report: the text made once a line is due
        p.report(fmt::format("at {:.4f}", p.seconds()), true);
        ++shown;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  std::vector<double> at;
  for (const std::string& line : lines_of(err)) {
    REQUIRE(line.rfind("tfm-test: at ", 0) == 0);
    at.push_back(std::stod(line.substr(13)));
  }
  // The first line one interval after the start, then one an interval;
  // a busy machine may delay a line, never bring one closer. The times are
  // printed to 1e-4 s: two of them may each round by half of that (seen
  // under ASan: 0.19999... apart).
  REQUIRE(at.size() >= 2);
  const double resolution = 1e-4;
  CHECK(at[0] >= 0.2 - resolution / 2);
  for (size_t i = 1; i < at.size(); ++i) CHECK(at[i] - at[i - 1] >= 0.2 - resolution);
}

TEST_CASE("progress: the default cadence is 30 s, a bad interval is an error", "[progress]") {
  log::set_program("tfm-test");
  ::unsetenv("TFM_PROGRESS_INTERVAL");
  CHECK(Progress::interval() == 30);
  {
    ScopedEnv env("TFM_PROGRESS_INTERVAL", "2.5");
    CHECK(Progress::interval() == 2.5);
  }
  for (const char* bad : {"soon", "-1", "1s", "nan"}) {
    ScopedEnv env("TFM_PROGRESS_INTERVAL", bad);
    REQUIRE_THROWS_WITH(Progress::interval(), Catch::Contains("TFM_PROGRESS_INTERVAL must be a number"));
  }
  const std::string err = capture_stderr([] {
    Progress p(Progress::Mode::lines);
    for (int i = 0; i < 100; ++i) p.report("not yet");
    p.report("forced", true);
  });
  CHECK(err == "tfm-test: forced\n");
}

TEST_CASE("progress: -q says nothing, a terminal gets a live line that is erased", "[progress]") {
  log::set_program("tfm-test");
  CHECK(capture_stderr([] {
          Progress p(Progress::Mode::quiet);
          p.report("x", true);
          p.status("y", true);
          p.line("z");
        }).empty());
  const std::string live = capture_stderr([] {
    Progress p(Progress::Mode::live);
    p.report("one");        // the first report draws at once
    p.report("two");        // within 200 ms of it: skipped
    log::info("a line");    // above the live line, which is drawn again
    p.report("three", true);
  });  // the end erases it
  CHECK(live ==
        "\rtfm-test: one\x1b[K"
        "\r\x1b[Ktfm-test: a line\n\rtfm-test: one\x1b[K"
        "\rtfm-test: three\x1b[K"
        "\r\x1b[K");
}

TEST_CASE("progress: ETA, sizes and the reading text", "[progress]") {
  CHECK(format_eta(42) == "42s");
  CHECK(format_eta(185) == "3m05s");
  CHECK(format_eta(3720) == "1h02m");
  CHECK(format_eta(-1) == "-");
  CHECK(eta_seconds(25, 100, 10) == Approx(30));
  CHECK(eta_seconds(0, 100, 10) < 0);
  CHECK(eta_seconds(5, 0, 10) < 0);
  CHECK(format_size(512) == "512 B");
  CHECK(format_size(12.3e6) == "12.3 MB");
  CHECK(reading_text("a.txt", 120, 2'000'000, 8'000'000, 2) ==
        "a.txt: 120 lines, 2.0 MB of 8.0 MB (25%) | 1.0 MB/s | ETA 6s");
  CHECK(reading_text("<stdin>", 7, 2'000, -1, 1) == "<stdin>: 7 lines, 2 kB | 2 kB/s");
}

TEST_CASE("tfm-train plot: curves from a log, a resumed run's records winning", "[progress][curve]") {
  test::TempDir dir;
  const std::string log = dir.file("log.json");
  io::write_file_atomic(log,
                        "{\"event\":\"start\",\"step\":0,\"parameters\":10}\n"
                        "{\"event\":\"train\",\"step\":100,\"loss\":7.5,\"ppl\":900}\n"
                        "{\"event\":\"train\",\"step\":200,\"loss\":6.0,\"ppl\":400}\n"
                        "{\"event\":\"valid\",\"step\":200,\"loss\":6.1,\"ppl\":410.5}\n"
                        "{\"event\":\"train\",\"step\":300,\"loss\":5.5,\"ppl\":200}\n"
                        "{\"event\":\"start\",\"step\":200}\n"
                        "{\"event\":\"train\",\"step\":300,\"loss\":5.25,\"ppl\":190}\n"
                        "{\"event\":\"valid\",\"step\":400,\"loss\":5,\"ppl\":150}\n"
                        "{\"event\":\"stop\",\"step\":400,\"reason\":\"--max-steps reached\"}\n");
  const viz::Curves c = viz::read_curves(log);
  REQUIRE(c.train_loss.size() == 3);
  CHECK(c.train_loss[2].step == 300);
  CHECK(c.train_loss[2].value == 5.25);
  REQUIRE(c.dev_ppl.size() == 2);
  CHECK(c.dev_ppl[0].value == 410.5);
  const std::string svg = viz::curves_svg(c, "demo & co");
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK(svg.find("demo &amp; co") != std::string::npos);
  CHECK(svg.find("training loss") != std::string::npos);
  CHECK(svg.find("dev perplexity") != std::string::npos);
  CHECK(svg.find("150 at update 400") != std::string::npos);
  size_t polylines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++polylines;
  CHECK(polylines == 2);

  io::write_file_atomic(log, "{\"event\":\"train\",\"step\":1,\"loss\":2}\nnot json\n");
  try {
    viz::read_curves(log);
    FAIL("a line that is not a record was read");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("not a record of tfm-train --log") != std::string::npos);
    CHECK(e.where() == log + ":2");
  }
  io::write_file_atomic(log, "{\"event\":\"start\",\"step\":0}\n");
  REQUIRE_THROWS_WITH(viz::read_curves(log), Catch::Contains("no train or valid record"));
}
