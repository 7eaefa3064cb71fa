#include "libcore/app/app.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "libcore/base/device.h"
#include "libcore/base/error.h"
#include "libcore/base/log.h"

namespace tfm {

namespace {

// OMP_NUM_THREADS as libgomp reads it: positive integers (strtoul's form:
// blanks and a '+' before the digits), comma-separated, blanks after them.
bool valid_thread_counts(const char* s) {
  const auto blank = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  for (;;) {
    while (blank(*s)) ++s;
    if (*s == '+') ++s;
    if (*s < '0' || *s > '9') return false;
    unsigned long long n = 0;
    for (; *s >= '0' && *s <= '9'; ++s) {
      n = n * 10 + static_cast<unsigned>(*s - '0');
      if (n > (1ull << 40)) return false;  // libgomp's overflow, and then some
    }
    if (n == 0) return false;
    while (blank(*s)) ++s;
    if (*s == '\0') return true;
    if (*s++ != ',') return false;
  }
}

// Runs before any library's constructor (.preinit_array of the program),
// so before libgomp reads OMP_NUM_THREADS and complains about a bad value
// in its own words (twice: prefer_sleeping_threads runs the program again).
// A bad value is a usage error: one line, exit 2.
void check_openmp_environment(int argc, char** argv, char** envp) {
  // getenv() cannot be used yet: libc sets `environ` in its own constructor.
  const char* threads = nullptr;
  for (char** e = envp; e != nullptr && *e != nullptr; ++e)
    if (std::strncmp(*e, "OMP_NUM_THREADS=", 16) == 0) threads = *e + 16;
  if (threads == nullptr || valid_thread_counts(threads)) return;
  const char* name = argc > 0 && argv[0] != nullptr ? argv[0] : "tfm";
  if (const char* slash = std::strrchr(name, '/')) name = slash + 1;
  // No std::string: nothing of the C++ runtime is set up yet.
  char line[512];
  size_t n = 0;
  const auto add = [&](const char* text, size_t most) {
    for (size_t i = 0; text[i] != '\0' && i < most && n < sizeof(line) - 2; ++i)
      line[n++] = static_cast<unsigned char>(text[i]) < 0x20 ? '?' : text[i];
  };
  add(name, 64);
  add(": error: OMP_NUM_THREADS must be a positive number of threads (or a comma-separated list "
      "of them), got '", 200);
  add(threads, 40);
  add("'", 1);
  line[n++] = '\n';
  (void)!::write(STDERR_FILENO, line, n);
  _exit(2);
}

__attribute__((section(".preinit_array"), used)) void (*const g_check_openmp_environment)(
    int, char**, char**) = check_openmp_environment;

// Flushes stdout; false (and `err`) when what the program wrote there is lost.
bool flush_stdout(int& err) {
  errno = 0;
  const bool ok = std::fflush(stdout) == 0 && !std::ferror(stdout);
  err = errno;
  return ok;
}

// The end of every program: its output on stdout checked (app.h).
int checked_exit(int status) {
  int err = 0;
  if (flush_stdout(err)) return status;
  if (err == EPIPE) return status == 0 ? 1 : status;  // the reader went away: quiet
  log::error("cannot write to stdout: {}", err != 0 ? std::strerror(err) : "write error");
  return 1;
}

}  // namespace

void add_config_option(CLI::App& app, const std::string& help) {
  app.set_config("--config", "", help);
  app.allow_config_extras(CLI::config_extras_mode::error);
}

void add_common_options(CLI::App& app, CommonOptions& o) {
  app.add_flag("-q,--quiet", o.quiet, "Print only warnings and errors on stderr");
  app.add_flag("-v,--verbose", o.verbose, "Print debugging detail on stderr");
  app.set_version_flag("--version", [] { return version_string(); }, "Print the version and exit");
}

std::string model_or_environment(const std::string& given) {
  if (!given.empty()) return given;
  const char* env = std::getenv("TFM_MODEL");
  if (env == nullptr || *env == '\0') throw CLI::ValidationError("no model: pass -m MODEL or set TFM_MODEL");
  return env;
}

void add_device_option(CLI::App& app, std::string& device) {
  app.add_option("--device", device, "Where to run: auto, cpu, cuda or cuda:N")
      ->default_val("auto")
      ->check([](const std::string& text) -> std::string {
        try {
          parse_device(text);
          return {};
        } catch (const Error& e) {
          return e.what();
        }
      });
}

namespace {

// A usage error: one line, the pointer to --help folded in.
void usage_line(const char* name, std::string_view what) {
  std::string text(what);
  // CLI11 says "--last: must be at least 1, got 0"; the option is the
  // sentence's subject (range.h).
  const size_t at = text.find(": must be ");
  if (at != std::string::npos && at > 0 && text.rfind(':', at - 1) == std::string::npos) text.erase(at, 1);
  while (!text.empty() && (text.back() == '.' || text.back() == ' ')) text.pop_back();
  log::error("{} (see '{} --help')", text, name);
}

}  // namespace

int run_program(const char* name, CLI::App& app, int argc, char** argv,
                const CommonOptions& common, const std::function<void()>& body) {
  log::set_program(name);
  app.name(name);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return checked_exit(0);
  } catch (const CLI::CallForVersion&) {
    std::printf("%s %s\n", name, version_string().c_str());
    return checked_exit(0);
  } catch (const CLI::ParseError& e) {
    usage_line(name, e.what());
    return 2;
  }
  log::set_level(common.quiet     ? log::Level::warn
                 : common.verbose ? log::Level::debug
                                  : log::Level::info);
  try {
    body();
    return checked_exit(0);
  } catch (const ReportedError&) {
    return 1;  // said by another process of the run
  } catch (const UsageError& e) {
    usage_line(name, e.what());
    return 2;
  } catch (const Error& e) {
    if (e.where().empty())
      log::error("{}", e.what());
    else
      log::error("{} ({})", e.what(), e.where());
  } catch (const std::bad_alloc&) {
    log::error("out of memory");
  } catch (const std::exception& e) {
    log::error("internal error: {}", e.what());
  }
  return 1;
}

}  // namespace tfm
