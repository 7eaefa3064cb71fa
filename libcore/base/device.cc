#include "libcore/base/device.h"

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "libcore/base/error.h"
#include "libcore/base/log.h"
#include "libcore/base/stream.h"

#ifdef TFM_WITH_CUDA
#include <cuda_runtime.h>

#include "libcore/base/cuda_check.h"
#endif

namespace tfm {

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index);
}

DeviceRequest parse_device(std::string_view text) {
  if (text == "auto") return {DeviceRequest::Kind::automatic, -1};
  if (text == "cpu") return {DeviceRequest::Kind::cpu, 0};
  if (text == "cuda") return {DeviceRequest::Kind::cuda, -1};
  if (text.starts_with("cuda:")) {
    std::string_view digits = text.substr(5);
    int index = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() && index >= 0)
      return {DeviceRequest::Kind::cuda, index};
  }
  fail("invalid device '{}': expected auto, cpu, cuda or cuda:N", text);
}

const CudaStatus& cuda_status() {
  static const CudaStatus status = [] {
    CudaStatus s;
#ifdef TFM_WITH_CUDA
    s.compiled = true;
    s.architectures = TFM_CUDA_ARCHITECTURES;
    cudaRuntimeGetVersion(&s.runtime_version);
    if (cudaDriverGetVersion(&s.driver_version) != cudaSuccess) s.driver_version = 0;
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear the sticky error for later calls
      s.why_none = s.driver_version == 0 ? "no CUDA driver is loaded on this machine"
                                         : fmt::format("CUDA reports: {}", cudaGetErrorString(err));
      return s;
    }
    for (int i = 0; i < count; ++i) {
      cudaDeviceProp p;
      if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
      s.devices.push_back({i, p.name, p.major, p.minor, p.totalGlobalMem, p.multiProcessorCount});
    }
    if (s.devices.empty()) s.why_none = "CUDA found no GPU";
#else
    s.why_none = "tfm was built without CUDA";
#endif
    return s;
  }();
  return status;
}

bool cuda_usable() { return !cuda_status().devices.empty(); }

Device select_device(const DeviceRequest& request) {
  using Kind = DeviceRequest::Kind;
  const CudaStatus& cuda = cuda_status();
  switch (request.kind) {
    case Kind::cpu:
      return Device::cpu();
    case Kind::automatic: {
      if (!cuda.devices.empty()) return Device::cuda(0);
      static std::once_flag noticed;
      std::call_once(noticed, [&] { log::info("running on the CPU ({})", cuda.why_none); });
      return Device::cpu();
    }
    case Kind::cuda: {
      const int index = request.index < 0 ? 0 : request.index;
      if (!cuda.compiled) fail_without_cuda();
      if (cuda.devices.empty()) fail("device cuda:{} is not usable: {}", index, cuda.why_none);
      if (index >= static_cast<int>(cuda.devices.size()))
        fail("device cuda:{} does not exist: this machine has {} GPU{} (cuda:0..cuda:{})", index,
             cuda.devices.size(), cuda.devices.size() == 1 ? "" : "s", cuda.devices.size() - 1);
      return Device::cuda(index);
    }
  }
  fail("unknown device request");
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("model name")) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
  }
  return "unknown CPU";
}

int available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}

// As OpenMP counts them.
int cpu_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return available_cpus();
}

void fail_without_cuda() { fail("unsupported device: cuda (built without CUDA)"); }

void activate(Device device) {
  if (device.is_cpu()) return;
#ifdef TFM_WITH_CUDA
  TFM_CUDA_CHECK(cudaSetDevice(device.index));
#else
  fail_without_cuda();
#endif
}

namespace {

// Zeroed CPU buffers of 2 MiB and more (device_alloc_zeroed) are mappings
// of their own: the kernel's fresh pages, zero until written and faulted in
// only where they are touched, so a plan sized for the largest batch costs
// time and memory only for what a batch uses. Their lengths, for munmap.
constexpr size_t kHugePage = size_t{2} << 20;
std::mutex mapped_mutex;
std::vector<std::pair<void*, size_t>> mapped;

void* map_cpu(size_t bytes) {
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // One huge page more than asked, trimmed to a 2 MiB boundary.
  void* raw = mmap(nullptr, rounded + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) fail("out of memory on the CPU: could not allocate {} bytes", bytes);
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(raw, aligned - start);
  const size_t tail = start + kHugePage - aligned;
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + rounded), tail);
  void* p = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
  // Large buffers (weights, the KV cache, a plan's activations) on 2 MiB
  // pages where the kernel has them: the decoder gathers keys and values
  // from all over its KV cache, one 4 KiB page each on small pages, and the
  // TLB's misses then cost more than the arithmetic. Advice only: no error
  // if refused.
  madvise(p, rounded, MADV_HUGEPAGE);
#endif
  try {
    const std::lock_guard<std::mutex> lock(mapped_mutex);
    mapped.emplace_back(p, rounded);
  } catch (const std::bad_alloc&) {
    munmap(p, rounded);
    fail("out of memory on the CPU: could not allocate {} bytes", bytes);
  }
  return p;
}

// Unmaps p if map_cpu made it.
bool unmap_cpu(void* p) noexcept {
  size_t bytes = 0;
  {
    const std::lock_guard<std::mutex> lock(mapped_mutex);
    auto it = std::find_if(mapped.begin(), mapped.end(), [&](const auto& m) { return m.first == p; });
    if (it == mapped.end()) return false;
    bytes = it->second;
    mapped.erase(it);
  }
  munmap(p, bytes);
  return true;
}

}  // namespace

void* device_alloc(Device device, size_t bytes) {
  if (bytes == 0) return nullptr;
  if (device.is_cpu()) {
    const size_t align = bytes >= kHugePage ? kHugePage : 64;
    const size_t rounded = (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded);
    if (!p) fail("out of memory on the CPU: could not allocate {} bytes", bytes);
#ifdef MADV_HUGEPAGE
    if (align == kHugePage) madvise(p, rounded, MADV_HUGEPAGE);  // as map_cpu's
#endif
    return p;
  }
#ifdef TFM_WITH_CUDA
  activate(device);
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    fail("out of memory on {}: could not allocate {:.1f} MiB ({:.1f} of {:.1f} MiB free)",
         device.str(), bytes / 1048576.0, free_bytes / 1048576.0, total_bytes / 1048576.0);
  }
  return p;
#else
  fail_without_cuda();
#endif
}

void* device_alloc_zeroed(Device device, size_t bytes, const Stream& stream) {
  if (device.is_cpu() && bytes >= kHugePage) return map_cpu(bytes);
  void* p = device_alloc(device, bytes);
  try {
    device_memset_zero(p, device, bytes, stream);
  } catch (...) {
    device_free(device, p);
    throw;
  }
  return p;
}

void device_free(Device device, void* ptr) noexcept {
  if (!ptr) return;
  if (device.is_cpu()) {
    if (!unmap_cpu(ptr)) std::free(ptr);
    return;
  }
#ifdef TFM_WITH_CUDA
  cudaSetDevice(device.index);
  cudaFree(ptr);
#endif
}

namespace {
#ifdef TFM_WITH_CUDA
cudaStream_t native_of(const Stream& stream, Device device) {
  TFM_REQUIRE(stream.device() == device, "a copy on {} was queued on a stream of {}", device.str(),
              stream.device().str());
  return static_cast<cudaStream_t>(stream.native());
}
#endif
}  // namespace

void device_copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                 const Stream& stream) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef TFM_WITH_CUDA
  const Device gpu = dst_device.is_cuda() ? dst_device : src_device;
  cudaStream_t s = native_of(stream, gpu);
  activate(gpu);
  TFM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  // To the host: the caller reads dst next. From pageable host memory CUDA
  // has staged src before returning; from pinned memory the caller keeps it
  // (device.h).
  if (dst_device.is_cpu()) TFM_CUDA_CHECK(cudaStreamSynchronize(s));
#else
  (void)stream;
  fail_without_cuda();
#endif
}

void device_download_async(void* pinned_dst, const void* src, Device src_device, size_t bytes,
                           const Stream& stream) {
  if (bytes == 0) return;
  if (src_device.is_cpu()) {
    std::memcpy(pinned_dst, src, bytes);
    return;
  }
#ifdef TFM_WITH_CUDA
  cudaStream_t s = native_of(stream, src_device);
  activate(src_device);
  TFM_CUDA_CHECK(cudaMemcpyAsync(pinned_dst, src, bytes, cudaMemcpyDeviceToHost, s));
#else
  (void)stream;
  fail_without_cuda();
#endif
}

void device_memset_zero(void* dst, Device device, size_t bytes, const Stream& stream) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    std::memset(dst, 0, bytes);
    return;
  }
#ifdef TFM_WITH_CUDA
  cudaStream_t s = native_of(stream, device);
  activate(device);
  TFM_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, s));
#else
  (void)stream;
  fail_without_cuda();
#endif
}

void device_synchronize(Device device) {
  if (device.is_cpu()) return;
#ifdef TFM_WITH_CUDA
  activate(device);
  TFM_CUDA_CHECK(cudaDeviceSynchronize());
#else
  fail_without_cuda();
#endif
}

void* pinned_alloc(size_t bytes) {
  if (bytes == 0) return nullptr;
#ifdef TFM_WITH_CUDA
  if (cuda_usable()) {
    void* p = nullptr;
    if (cudaMallocHost(&p, bytes) == cudaSuccess) return p;  // 256-byte aligned
    cudaGetLastError();
    fail("out of pinned host memory: could not allocate {:.1f} MiB", bytes / 1048576.0);
  }
#endif
  return device_alloc(Device::cpu(), bytes);
}

void pinned_free(void* ptr) noexcept {
  if (!ptr) return;
#ifdef TFM_WITH_CUDA
  if (cuda_usable()) {
    cudaFreeHost(ptr);
    return;
  }
#endif
  std::free(ptr);
}

}  // namespace tfm
