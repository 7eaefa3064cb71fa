#include "libcore/base/memory.h"

#include <algorithm>
#include <cstring>

#include "libcore/base/stream.h"

namespace tfm {

std::string_view memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::parameters: return "parameters";
    case MemoryKind::gradients: return "gradients";
    case MemoryKind::optimizer: return "optimizer";
    case MemoryKind::activations: return "activations";
    case MemoryKind::workspace: return "workspace";
    case MemoryKind::kv_cache: return "kv-cache";
    case MemoryKind::io: return "io";
  }
  return "?";
}

std::string format_bytes(size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (b < 1024.0 * 1024) return fmt::format("{:.1f} KiB", b / 1024);
  if (b < 1024.0 * 1024 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
}

int MemoryPlan::add(MemoryKind kind, std::string name, DType dtype, Shape shape) {
  size_t& size = sizes_[static_cast<size_t>(kind)];
  const size_t offset = (size + kAlignment - 1) / kAlignment * kAlignment;
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  entries_.push_back({std::move(name), kind, dtype, shape, offset, bytes});
  size = offset + bytes;
  return static_cast<int>(entries_.size()) - 1;
}

size_t MemoryPlan::total() const {
  size_t t = 0;
  for (size_t s : sizes_) t += s;
  return t;
}

const MemoryPlan::Entry& MemoryPlan::entry(int id) const {
  TFM_REQUIRE(id >= 0 && id < static_cast<int>(entries_.size()),
              "memory plan has no entry {} (it has {})", id, entries_.size());
  return entries_[static_cast<size_t>(id)];
}

std::string MemoryPlan::report() const {
  std::string s;
  for (int k = 0; k < kMemoryKinds; ++k) {
    if (sizes_[static_cast<size_t>(k)] == 0) continue;
    s += fmt::format("{} {}, ", memory_kind_name(static_cast<MemoryKind>(k)),
                     format_bytes(sizes_[static_cast<size_t>(k)]));
  }
  return s + "total " + format_bytes(total());
}

PlannedMemory::PlannedMemory(const MemoryPlan& plan, Device device) : plan_(plan), device_(device) {
  allocate({}, nullptr);
}

PlannedMemory::PlannedMemory(const MemoryPlan& plan, Device device,
                             std::initializer_list<MemoryKind> zeroed, const Stream& stream)
    : plan_(plan), device_(device) {
  allocate(zeroed, &stream);
}

void PlannedMemory::allocate(std::initializer_list<MemoryKind> zeroed, const Stream* stream) {
  try {
    for (int k = 0; k < kMemoryKinds; ++k) {
      const auto kind = static_cast<MemoryKind>(k);
      const bool zero = std::find(zeroed.begin(), zeroed.end(), kind) != zeroed.end();
      blocks_[static_cast<size_t>(k)] = zero ? device_alloc_zeroed(device_, plan_.bytes(kind), *stream)
                                             : device_alloc(device_, plan_.bytes(kind));
    }
  } catch (const Error& e) {
    for (int k = 0; k < kMemoryKinds; ++k) device_free(device_, blocks_[static_cast<size_t>(k)]);
    throw Error(fmt::format("{}; the plan needs {}", e.what(), plan_.report()));
  }
}

PlannedMemory::~PlannedMemory() {
  for (void* b : blocks_) device_free(device_, b);
}

TensorView PlannedMemory::view(int id) const {
  const MemoryPlan::Entry& e = plan_.entry(id);
  auto* base = static_cast<char*>(blocks_[static_cast<size_t>(e.kind)]);
  return TensorView(base + e.offset, e.dtype, e.shape, device_);
}

HostStaging::HostStaging(size_t bytes, const Stream& stream) : stream_(stream), bytes_(bytes) {
  if (stream.device().is_cpu()) return;  // plain copies: nothing to stage
  try {
    for (size_t k = 0; k < 2; ++k) {
      buffers_[k] = pinned_alloc(bytes);
      copied_[k] = std::make_unique<Event>(stream.device());
    }
  } catch (...) {
    for (void* b : buffers_) pinned_free(b);
    throw;
  }
}

HostStaging::~HostStaging() {
  // The copies from the buffers may still be queued: let them run first.
  for (const auto& e : copied_)
    if (e) try { e->synchronize(); } catch (...) {}
  for (void* b : buffers_) pinned_free(b);
}

void HostStaging::upload(std::span<const Part> parts) {
  size_t total = 0;
  for (const auto& [dst, values] : parts) {
    TFM_REQUIRE(dst.dtype() == DType::i32 && dst.numel() == static_cast<int64_t>(values.size()),
                "upload: {} values for a destination of {}", values.size(), dst.str());
    total += values.size() * sizeof(int32_t);
  }
  if (stream_.device().is_cpu()) {
    for (const auto& [dst, values] : parts)
      std::memcpy(dst.data(), values.data(), values.size() * sizeof(int32_t));
    return;
  }
  TFM_REQUIRE(total <= bytes_, "upload of {} bytes is over the {} bytes staged", total, bytes_);
  const int k = next_;
  next_ ^= 1;
  copied_[static_cast<size_t>(k)]->synchronize();  // the copies from this buffer have run
  auto* base = static_cast<char*>(buffers_[static_cast<size_t>(k)]);
  size_t at = 0;
  for (const auto& [dst, values] : parts) {
    const size_t n = values.size() * sizeof(int32_t);
    std::memcpy(base + at, values.data(), n);
    device_copy(dst.data(), dst.device(), base + at, Device::cpu(), n, stream_);
    at += n;
  }
  copied_[static_cast<size_t>(k)]->record(stream_);
}

HostReadback::HostReadback(size_t bytes, int slots, const Stream& stream)
    : stream_(stream), bytes_(bytes) {
  TFM_REQUIRE(slots >= 1, "a readback needs at least one slot");
  try {
    for (int k = 0; k < slots; ++k) {
      buffers_.push_back(pinned_alloc(bytes));
      copied_.push_back(std::make_unique<Event>(stream.device()));
    }
  } catch (...) {
    for (void* b : buffers_) pinned_free(b);
    throw;
  }
}

HostReadback::~HostReadback() {
  // Copies into the buffers may still be queued: let them land first.
  for (const auto& e : copied_)
    try { e->synchronize(); } catch (...) {}
  for (void* b : buffers_) pinned_free(b);
}

int HostReadback::download(std::span<const TensorView> src) {
  const int k = next_;
  next_ = (next_ + 1) % static_cast<int>(buffers_.size());
  auto* base = static_cast<char*>(buffers_[static_cast<size_t>(k)]);
  size_t at = 0;
  for (const TensorView& t : src) {
    TFM_REQUIRE(at + t.bytes() <= bytes_, "readback of over the {} bytes planned", bytes_);
    device_download_async(base + at, t.data(), t.device(), t.bytes(), stream_);
    at += t.bytes();
  }
  copied_[static_cast<size_t>(k)]->record(stream_);
  return k;
}

bool HostReadback::ready(int slot) const {
  TFM_REQUIRE(slot >= 0 && slot < static_cast<int>(buffers_.size()), "readback slot {} does not exist", slot);
  return copied_[static_cast<size_t>(slot)]->done();
}

const char* HostReadback::read(int slot) const {
  TFM_REQUIRE(slot >= 0 && slot < static_cast<int>(buffers_.size()), "readback slot {} does not exist", slot);
  copied_[static_cast<size_t>(slot)]->synchronize();
  return static_cast<const char*>(buffers_[static_cast<size_t>(slot)]);
}

}  // namespace tfm
