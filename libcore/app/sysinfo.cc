#include "libcore/app/sysinfo.h"

#include "kernels/cpu/blas.h"
#include "libcore/base/json.h"
#include "libcore/base/memory.h"
#include "libcore/base/process.h"
#include "libcore/dist/comm.h"

namespace tfm {

std::string system_report_text(Device selected) {
  const auto& blas = ops::cpu::blas();
  const CudaStatus& cuda = cuda_status();
  std::string s = fmt::format("version: {}\n", version_string());
  s += fmt::format("cpu:     {}, {} thread{}\n", cpu_name(), cpu_threads(), cpu_threads() == 1 ? "" : "s");
  s += fmt::format("blas:    {} core {} ({}), {} threads\n", blas.library, blas.core,
                   blas.core_source, blas.threads);
  if (cuda.devices.empty()) s += fmt::format("cuda:    none ({})\n", cuda.why_none);
  for (const CudaDeviceInfo& d : cuda.devices)
    s += fmt::format("cuda:{}:  {}, compute capability {}.{}, {} SMs, {}\n", d.index, d.name,
                     d.major, d.minor, d.multiprocessors, format_bytes(d.memory_bytes));
  s += fmt::format("mpi:     {}\n", dist::build_description());
  s += fmt::format("device:  {}\n", selected.str());
  return s;
}

std::string system_report_json(Device selected) {
  const auto& blas = ops::cpu::blas();
  const CudaStatus& cuda = cuda_status();
  JsonWriter j;
  j.begin_object().field("version", version_string());
  j.key("cpu").begin_object().field("name", cpu_name()).field("threads", cpu_threads()).end_object();
  j.key("blas")
      .begin_object()
      .field("library", blas.library)
      .field("core", blas.core)
      .field("core_source", blas.core_source)
      .field("config", blas.config)
      .field("threads", blas.threads)
      .end_object();
  j.key("cuda").begin_object().field("compiled", cuda.compiled);
  j.field("architectures", cuda.architectures)
      .field("runtime_version", cuda.runtime_version)
      .field("driver_version", cuda.driver_version);
  j.key("devices").begin_array();
  for (const CudaDeviceInfo& d : cuda.devices)
    j.begin_object()
        .field("index", d.index)
        .field("name", d.name)
        .field("compute_capability", fmt::format("{}.{}", d.major, d.minor))
        .field("multiprocessors", d.multiprocessors)
        .field("memory_bytes", d.memory_bytes)
        .end_object();
  j.end_array();
  if (cuda.devices.empty()) j.field("why_none", cuda.why_none);
  j.end_object();
  j.field("mpi", dist::build_description());
  j.field("device", selected.str()).end_object();
  return j.str() + "\n";
}

}  // namespace tfm
