// Checkpoints (model.bin): one self-describing file holding a model's
// configuration text, its embedded tokenizer, a table of named tensors with
// their data, and named optional sections (training state). The byte layout
// is documented in man/tfm.7 ("CHECKPOINT FORMAT"); tests/reference/ reads it
// with an independent Python reader written from that page alone.
//
// Contracts:
// - Writing is atomic: a temporary file beside the target, fsync, rename. On
//   any error the temporary file is removed and an existing file at the path
//   is left as it was.
// - Data is zstd-compressed in a stream, chunk by chunk, straight from the
//   caller's memory: writing never copies a tensor, reading holds one copy.
// - Reading validates every byte (CRC-32 over the header, the directory, and
//   every section's stored and decompressed bytes) and every length against
//   the file size, and reports any problem as one tfm::Error sentence that
//   names the file ("model.bin is corrupt: section 'tensors' fails its
//   checksum"), never a crash or an allocation sized by a corrupt field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "libcore/base/dtype.h"
#include "libcore/base/tensor.h"

namespace tfm::io {

inline constexpr uint32_t kCheckpointVersion = 1;

// An owning tensor as read from (or to be written to) a checkpoint.
struct CheckpointTensor {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  std::vector<std::byte> data;  // row-major, shape.numel() * dtype_size(dtype) bytes
};

// A whole checkpoint in memory. `sections` are the optional named sections
// (training state and the like): opaque bytes, names unique and not one of
// the reserved names "config", "tokenizer", "tensor_table", "tensors".
struct Checkpoint {
  std::string config;     // the model configuration as text
  std::string tokenizer;  // opaque bytes (a SentencePiece model), may be empty
  std::vector<CheckpointTensor> tensors;
  std::vector<std::pair<std::string, std::string>> sections;

  const CheckpointTensor* find(std::string_view name) const;
  const std::string* find_section(std::string_view name) const;
};

// Writing without copying: tensors are views of dense host memory (e.g. slices
// of the flat parameter buffer), sections are views of bytes.
struct NamedTensor {
  std::string name;
  TensorView view;  // on the CPU; data may be null only when numel() == 0
};
// A byte sink: receives data in order, in pieces of any size.
using ByteSink = std::function<void(std::span<const std::byte>)>;

struct NamedSection {
  NamedSection(std::string name, std::string_view data) : name(std::move(name)), data(data) {}
  // A section too large to hold (Adam's moments copied from another
  // checkpoint): `produce` hands exactly `bytes` bytes to the sink it is given.
  NamedSection(std::string name, uint64_t bytes, std::function<void(const ByteSink&)> produce)
      : name(std::move(name)), produce(std::move(produce)), bytes(bytes) {}

  std::string name;
  std::string_view data;
  std::function<void(const ByteSink&)> produce;  // when set, `data` is unused
  uint64_t bytes = 0;
};

struct CheckpointWriteOptions {
  int zstd_level = 3;  // 1 (fast) .. 19 (small)
  int threads = 1;     // zstd worker threads for the tensor data; 1: the calling thread
};

void write_checkpoint(const std::string& path, std::string_view config,
                      std::string_view tokenizer, std::span<const NamedTensor> tensors,
                      std::span<const NamedSection> sections = {},
                      const CheckpointWriteOptions& options = {});
void write_checkpoint(const std::string& path, const Checkpoint& ckpt,
                      const CheckpointWriteOptions& options = {});

// What a checkpoint holds, read without touching the tensor data or the
// tokenizer: header, directory, configuration and tensor table.
enum class SectionKind : uint16_t { config = 1, tokenizer = 2, tensor_table = 3, tensors = 4, extra = 5 };

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t offset = 0;  // in the decompressed tensor data
  uint64_t bytes = 0;
};
struct SectionInfo {
  std::string name;
  SectionKind kind = SectionKind::extra;
  uint64_t stored_bytes = 0;  // in the file
  uint64_t raw_bytes = 0;     // decompressed
};
struct CheckpointInfo {
  uint32_t version = 0;
  uint64_t file_bytes = 0;
  std::string config;
  std::vector<TensorInfo> tensors;    // in table order
  std::vector<SectionInfo> sections;  // in directory (= file) order, all kinds

  const TensorInfo* find(std::string_view name) const;
};

// Reading into memory the caller provides: asked once per tensor, in table
// order, it returns where that tensor's bytes go (exactly info.bytes long)
// or an empty span to skip it.
using TensorDest = std::function<std::span<std::byte>(const TensorInfo&)>;
// Streaming without holding: a piece of a tensor's bytes, in table order, in
// pieces of any size (an element may straddle two pieces), `offset` being
// where the piece starts in that tensor; a tensor of 0 bytes gets one empty
// piece.
using TensorPiece =
    std::function<void(const TensorInfo&, uint64_t offset, std::span<const std::byte>)>;

// A checkpoint opened once: the header, directory, configuration and tensor
// table are read and checked when it opens; the tokenizer, the tensor data
// and the optional sections are read on demand from the same open file.
// Every read verifies its checksums after its last byte: on an Error, the
// destinations or pieces it filled hold unverified bytes.
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::string& path);
  ~CheckpointReader();
  CheckpointReader(CheckpointReader&&) noexcept;
  CheckpointReader& operator=(CheckpointReader&&) noexcept;

  const std::string& path() const;
  const CheckpointInfo& info() const { return info_; }
  std::string tokenizer() const;  // the embedded tokenizer's bytes; empty when none
  Checkpoint read_all() const;
  void read_tensors(const TensorDest& dest) const;
  void stream_tensors(const TensorPiece& piece) const;
  // One optional section; Error if the checkpoint has none by that name.
  std::string section(std::string_view name) const;
  void stream_section(std::string_view name, const ByteSink& sink) const;

 private:
  struct File;
  std::unique_ptr<File> file_;
  CheckpointInfo info_;
};

// One read of one thing, for callers that need nothing else of the file
// (each opens it, as CheckpointReader does).
CheckpointInfo read_checkpoint_info(const std::string& path);
Checkpoint read_checkpoint(const std::string& path);
void read_checkpoint_tensors(const std::string& path, const TensorDest& dest);
void stream_checkpoint_tensors(const std::string& path, const TensorPiece& piece);
std::string read_checkpoint_section(const std::string& path, std::string_view name);
void stream_checkpoint_section(const std::string& path, std::string_view name,
                               const ByteSink& sink);

// Whether the file starts with the checkpoint magic (reads 8 bytes; a file
// that cannot be opened is not one).
bool is_checkpoint(const std::string& path);

// The embedded tokenizer alone (empty when none was embedded), without
// touching the tensor data: what tfm-tok -m model.bin needs.
std::string read_checkpoint_tokenizer(const std::string& path);

}  // namespace tfm::io
