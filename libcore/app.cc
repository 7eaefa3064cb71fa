#include "libcore/app.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <new>

#include "libcore/error.h"
#include "libcore/log.h"

#ifndef TFM_VERSION
#define TFM_VERSION "0.0.0"
#endif

namespace tfm {

std::string version_string() {
  const CudaStatus& cuda = cuda_status();
  if (!cuda.compiled) return fmt::format("tfm {} (CPU only)", TFM_VERSION);
  return fmt::format("tfm {} (CUDA {}.{} for {})", TFM_VERSION, cuda.runtime_version / 1000,
                     cuda.runtime_version % 1000 / 10, cuda.architectures);
}

void prefer_sleeping_threads(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("OMP_WAIT_POLICY");  // still here: run as we are
}

void add_common_options(CLI::App& app, CommonOptions& o) {
  app.add_flag("-q,--quiet", o.quiet, "Print only warnings and errors on stderr");
  app.add_flag("-v,--verbose", o.verbose, "Print debugging detail on stderr");
  app.set_version_flag("--version", [] { return version_string(); }, "Print the version and exit");
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

int run_program(const char* name, CLI::App& app, int argc, char** argv,
                const CommonOptions& common, const std::function<void()>& body) {
  log::set_program(name);
  app.name(name);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::printf("%s %s\n", name, version_string().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    log::error("{}", e.what());
    std::fprintf(stderr, "Run '%s --help' for the options.\n", name);
    return 2;
  }
  log::set_level(common.quiet     ? log::Level::warn
                 : common.verbose ? log::Level::debug
                                  : log::Level::info);
  try {
    body();
    return 0;
  } catch (const ReportedError&) {
    return 1;  // said by another process of the run
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
