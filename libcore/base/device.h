// The device layer: which devices exist, which one a program runs on, and
// raw memory on each. This file and device.cc are the only parts of libcore
// that see the CUDA runtime; everything else goes through kernels/ops.h.
//
// --device takes auto|cpu|cuda|cuda:N. auto picks cuda:0 when a GPU is usable
// and otherwise says once on stderr that it runs on the CPU, and why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tfm {

class Stream;

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static constexpr Device cpu() { return {DeviceType::cpu, 0}; }
  static constexpr Device cuda(int i) { return {DeviceType::cuda, i}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  std::string str() const;  // "cpu", "cuda:0"
  friend bool operator==(const Device&, const Device&) = default;
};

// What the user asked for. index -1 with cuda means "cuda" without a number.
struct DeviceRequest {
  enum class Kind : uint8_t { automatic, cpu, cuda };
  Kind kind = Kind::automatic;
  int index = -1;
};

// Parses "auto", "cpu", "cuda", "cuda:N"; throws Error for anything else.
DeviceRequest parse_device(std::string_view text);

// Resolves a request against the devices present. automatic falls back to
// the CPU with one notice on stderr (once per process); an explicit cuda
// request that cannot be met throws Error saying why.
Device select_device(const DeviceRequest& request);

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;          // compute capability
  size_t memory_bytes = 0;
  int multiprocessors = 0;
};

struct CudaStatus {
  bool compiled = false;             // built with TFM_CUDA
  std::string architectures;         // "80;90" as built
  int runtime_version = 0;           // 13000 = 13.0
  int driver_version = 0;            // 0 when no driver is loaded
  std::vector<CudaDeviceInfo> devices;
  std::string why_none;              // when devices is empty: a sentence
};

// Probed once per process, then cached. Never throws: a machine without a
// driver is a normal state, described in why_none.
const CudaStatus& cuda_status();
bool cuda_usable();

// The CPU as the OS names it ("Intel(R) Xeon(R) ..."), the CPUs this
// process may run on (taskset, cgroup cpusets; else all), and the number of
// threads tfm's CPU ops use (OMP_NUM_THREADS's first number, else those CPUs).
std::string cpu_name();
int available_cpus();
int cpu_threads();

// Makes `device` current for the calling thread (cudaSetDevice); no-op on
// the CPU.
void activate(Device device);

// The one answer of a build without CUDA to a CUDA device:
// "unsupported device: cuda (built without CUDA)".
[[noreturn]] void fail_without_cuda();

// Raw memory. CPU memory is 64-byte aligned; CUDA memory comes from
// cudaMalloc. Sizes of 0 return nullptr. Out of memory throws Error naming
// the device and the size.
void* device_alloc(Device device, size_t bytes);
// The same, all zeros: on the CPU, from 2 MiB on, the kernel's fresh pages,
// zero without a write (a page costs its first touch only where it is
// used); elsewhere filled on `stream`.
void* device_alloc_zeroed(Device device, size_t bytes, const Stream& stream);
void device_free(Device device, void* ptr) noexcept;

// Raw copies and fills, each ordered on `stream` (a tfm::Stream on the
// device that owns the device memory; libcore/base/stream.h). Nothing in tfm runs
// on CUDA's legacy default stream: tfm's streams are non-blocking, so work
// there would be unordered against theirs. What returns when:
//   device -> CPU   complete on return (the stream is waited for);
//   CPU -> device   lands in stream order. A pageable source may be reused
//                   on return (CUDA stages it, and may wait for the stream
//                   to do so); a pinned one (pinned_alloc) must stay as it is
//                   until the stream has run the copy (HostStaging, memory.h);
//   device -> device, memset, 2-D copy   queued in stream order.
// On the CPU everything completes on return.
void device_copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                 const Stream& stream);
void device_memset_zero(void* dst, Device device, size_t bytes, const Stream& stream);

// Device -> pinned host memory (pinned_alloc), queued on `stream` and not
// waited for: the host may read dst only after an Event recorded behind the
// copy has been synchronized (HostReadback, memory.h). On the CPU the copy
// completes on return.
void device_download_async(void* pinned_dst, const void* src, Device src_device, size_t bytes,
                           const Stream& stream);


// Waits for all work queued on `device`, on every stream (cudaDeviceSynchronize).
// For tests and program ends, never inside a step.
void device_synchronize(Device device);

// Host memory the GPU can copy from and to without staging (cudaMallocHost),
// 64-byte aligned; plain memory in a build without CUDA or without a GPU.
// Batches are uploaded from it so that an upload does not stall the host
// (HostStaging, memory.h).
void* pinned_alloc(size_t bytes);
void pinned_free(void* ptr) noexcept;

}  // namespace tfm
