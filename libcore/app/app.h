// The shell of every tfm program: options common to all of them, and the
// one place where errors become exit codes (docs/architecture.md,
// "Conventions of every program"):
//   0  success, and -h/--help (usage on stdout)
//   1  bad input or a failure: one line "tfm-NAME: error: WHAT (WHERE)"
//   2  bad usage: an unknown option, a bad value (NaN included) or a bad
//      environment (OMP_NUM_THREADS), one line that points to --help
// What a program writes on stdout is checked at its end: a write error
// (a full disk, /dev/full) is an error line and exit 1, never a silent loss;
// a closed pipe (| head) ends the program quietly, as SIGPIPE does.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <functional>
#include <limits>
#include <string>

#include "libcore/base/device.h"
#include "libcore/base/process.h"
#include "libcore/base/range.h"

namespace tfm {

struct CommonOptions {
  bool quiet = false;
  int verbose = 0;
};

// Adds -q/--quiet, -v/--verbose and --version to `app`.
void add_common_options(CLI::App& app, CommonOptions& options);

// Adds --device auto|cpu|cuda[:N] (default auto), validated while parsing.
void add_device_option(CLI::App& app, std::string& device);

// The model a program reads: `given` (-m), else $TFM_MODEL; neither is a
// usage error naming both (CLI::ValidationError, for a callback).
std::string model_or_environment(const std::string& given);

// --config FILE (CLI11 INI/TOML): a key that names no option is a usage error,
// as on the command line.
void add_config_option(CLI::App& app, const std::string& help);

// The numeric options' one rule (range.h): a value outside [lo, hi] is a
// usage error "--last must be at least 1, got 0"; NaN is outside every range
// (CLI::Range lets it through) and text that is no number of the option's
// type is refused by name. T is the option's type.
template <typename T>
CLI::Validator Range(T lo, T hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        T value{};
        if (!CLI::detail::lexical_cast(text, value))
          return fmt::format("must be {}, got '{}'", std::is_integral_v<T> ? "a whole number" : "a number",
                             text);
        if (!(value >= lo && value <= hi)) return out_of_range(lo, hi, value, text);
        return {};
      },
      fmt::format("{} {}", CLI::detail::type_name<T>(), range_text(lo, hi)));
}

// Range(lo, the type's largest value).
template <typename T>
CLI::Validator AtLeast(T lo) {
  return Range(lo, std::numeric_limits<T>::max());
}

// Parses argv into `app`, applies the common options, runs `body` and maps
// what it throws to the exit codes above. `name` is the program's name
// ("tfm-info") used as the prefix of every message.
int run_program(const char* name, CLI::App& app, int argc, char** argv,
                const CommonOptions& common, const std::function<void()>& body);

}  // namespace tfm
