// Memory planned before the first step, never grown in the loop.
//
// A MemoryPlan is a table of named tensors, each of one kind. Sizes come
// from (config, max tokens, max length) before anything runs; allocate()
// then makes exactly one block per kind and hands out views into it. Nothing
// grows afterwards: a plan that has been allocated refuses new entries, and
// report() gives the totals a program prints at start:
//   parameters 250.1 MiB, gradients 250.1 MiB, optimizer 500.2 MiB, ...
#pragma once

#include <array>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"

namespace tfm {

enum class MemoryKind : uint8_t {
  parameters, gradients, optimizer, activations, workspace, kv_cache, io,
};
inline constexpr int kMemoryKinds = 7;
std::string_view memory_kind_name(MemoryKind kind);

// "812.0 MiB", "1.52 GiB", "96 B"
std::string format_bytes(size_t bytes);

class MemoryPlan {
 public:
  // Every entry starts on this boundary (covers CUDA vector loads and
  // cuBLASLt's alignment preferences).
  static constexpr size_t kAlignment = 256;

  struct Entry {
    std::string name;
    MemoryKind kind;
    DType dtype;
    Shape shape;
    size_t offset;  // within its kind's block
    size_t bytes;
  };

  // Adds a tensor to the plan and returns its id for view().
  int add(MemoryKind kind, std::string name, DType dtype, Shape shape);

  size_t bytes(MemoryKind kind) const { return sizes_[static_cast<size_t>(kind)]; }
  size_t total() const;
  const std::vector<Entry>& entries() const { return entries_; }
  const Entry& entry(int id) const;
  std::string report() const;  // non-empty kinds in order, then the total

 private:
  std::vector<Entry> entries_;
  std::array<size_t, kMemoryKinds> sizes_{};
};

// The memory of a plan on one device: one block per non-empty kind.
class PlannedMemory {
 public:
  PlannedMemory(const MemoryPlan& plan, Device device);
  // Blocks of the kinds in `zeroed` start as zeros (device_alloc_zeroed:
  // on the CPU no page is written before it is used), filled on `stream`.
  PlannedMemory(const MemoryPlan& plan, Device device, std::initializer_list<MemoryKind> zeroed,
                const Stream& stream);
  ~PlannedMemory();
  PlannedMemory(const PlannedMemory&) = delete;
  PlannedMemory& operator=(const PlannedMemory&) = delete;

  TensorView view(int id) const;
  // The whole block of one kind, as bytes (e.g. the flat parameter buffer).
  void* block(MemoryKind kind) const { return blocks_[static_cast<size_t>(kind)]; }
  const MemoryPlan& plan() const { return plan_; }
  Device device() const { return device_; }

 private:
  void allocate(std::initializer_list<MemoryKind> zeroed, const Stream* stream);

  MemoryPlan plan_;  // a copy: the plan is frozen once allocated
  Device device_;
  std::array<void*, kMemoryKinds> blocks_{};
};

// Uploads of small host arrays (a batch's ids, lengths and offsets; a
// decoding step's rows) that do not stall the host: upload() writes them
// into one of two pinned buffers and queues their copies in the stream's
// order. A buffer is written again only after the stream has run the copies
// from it (an event), so the host waits, if ever, for the upload before the
// last one, never for the step in flight. On the CPU the copies are plain.
class HostStaging {
 public:
  using Part = std::pair<TensorView, std::span<const int32_t>>;  // dst (i32), values

  HostStaging(size_t bytes, const Stream& stream);  // bytes: the most one upload() takes
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // dst = values for every part (dst may be a prefix of a larger buffer:
  // its numel must equal values.size()).
  void upload(std::span<const Part> parts);

 private:
  const Stream& stream_;
  size_t bytes_;
  std::array<void*, 2> buffers_{};
  std::array<std::unique_ptr<Event>, 2> copied_;
  int next_ = 0;
};

// Downloads of small device arrays that the host reads later (an update's
// loss sums while the next update runs): download() queues a copy into the
// next of `slots` pinned buffers and records an event behind it; read()
// waits for that copy alone, never for the work queued after it. A slot is
// reused `slots` downloads later: read a download before that. On the CPU
// the copies complete at once.
class HostReadback {
 public:
  HostReadback(size_t bytes, int slots, const Stream& stream);  // bytes: the most a download takes
  ~HostReadback();
  HostReadback(const HostReadback&) = delete;
  HostReadback& operator=(const HostReadback&) = delete;

  // Queues src's bytes (in order, back to back) into a slot; returns the slot.
  int download(std::span<const TensorView> src);
  // The slot's bytes, once its copy has run (the host waits for it here).
  const char* read(int slot) const;
  // Whether the slot's copy has run (no wait).
  bool ready(int slot) const;

 private:
  const Stream& stream_;
  size_t bytes_;
  std::vector<void*> buffers_;
  std::vector<std::unique_ptr<Event>> copied_;
  int next_ = 0;
};

}  // namespace tfm
