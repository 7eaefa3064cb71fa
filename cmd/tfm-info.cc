// tfm-info: what tfm was built with and what it runs on here.
//
//   tfm-info                 build, CPU and BLAS core, CUDA devices
//   tfm-info --device cuda   fails with the reason when no GPU is usable
//   tfm-info --json          the same as one JSON object
#include <cstdio>

#include "libcore/app/app.h"
#include "libcore/app/sysinfo.h"

namespace {

struct Options {
  tfm::CommonOptions common;
  std::string device = "auto";
  bool json = false;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Print how tfm was built and the devices it can run on here."};
  tfm::add_common_options(app, o.common);
  tfm::add_device_option(app, o.device);
  app.add_flag("--json", o.json, "Print one JSON object instead of text");
  return tfm::run_program("tfm-info", app, argc, argv, o.common, [&] {
    const tfm::Device device = tfm::select_device(tfm::parse_device(o.device));
    const std::string report =
        o.json ? tfm::system_report_json(device) : tfm::system_report_text(device);
    std::fputs(report.c_str(), stdout);
  });
}
