// What tfm runs on: build, CPU and its BLAS core, CUDA devices. Printed by
// tfm-info, and the first thing to attach to a bug report.
#pragma once

#include <string>

#include "libcore/base/device.h"

namespace tfm {

// Text (one "key: value" line per item) or one JSON object. Loads OpenBLAS
// to report the core it runs. `selected` is the device --device resolved to.
std::string system_report_text(Device selected);
std::string system_report_json(Device selected);

}  // namespace tfm
