// Checkpoint reader; the byte layout is man/tfm.7, "CHECKPOINT FORMAT". In
// short: a 64-byte header, the sections back to back (config, tokenizer,
// tensor_table, tensors, then the optional ones), and a section directory that
// ends the file. Every byte lies under a CRC-32, and every length is checked
// against the file. The writer is checkpoint_write.cc; what both share is in
// checkpoint_format.h.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <set>

#include "libcore/base/error.h"
#include "libcore/io/checkpoint.h"
#include "libcore/io/checkpoint_format.h"

namespace tfm::io {
using namespace detail;

namespace {

template <typename... Args>
[[noreturn]] void corrupt(const std::string& path, fmt::format_string<Args...> format,
                          Args&&... args) {
  fail("{} is corrupt: {}", path, fmt::format(format, std::forward<Args>(args)...));
}

// Bounds-checked parsing of a byte string the file gave us.
class Cursor {
 public:
  Cursor(const std::string& path, std::string_view what, std::string_view bytes)
      : path_(path), what_(what), bytes_(bytes) {}
  template <typename T>
  T get_le() {
    need(sizeof(T));
    const T v = get<T>(reinterpret_cast<const unsigned char*>(bytes_.data() + pos_));
    pos_ += sizeof(T);
    return v;
  }
  std::string name() {
    const uint16_t n = get_le<uint16_t>();
    if (n == 0) corrupt(path_, "{} holds an empty name", what_);
    need(n);
    std::string s(bytes_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  size_t left() const { return bytes_.size() - pos_; }

 private:
  void need(size_t n) const {
    if (left() < n) corrupt(path_, "{} ends in the middle of an entry", what_);
  }
  const std::string& path_;
  std::string_view what_;
  std::string_view bytes_;
  size_t pos_ = 0;
};

Shape make_shape(const int64_t* d, int rank) {
  switch (rank) {
    case 0: return Shape{};
    case 1: return Shape{d[0]};
    case 2: return Shape{d[0], d[1]};
    case 3: return Shape{d[0], d[1], d[2]};
    case 4: return Shape{d[0], d[1], d[2], d[3]};
    case 5: return Shape{d[0], d[1], d[2], d[3], d[4]};
    default: return Shape{d[0], d[1], d[2], d[3], d[4], d[5]};
  }
}

struct ZstdDFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// ---- reading ----

class InFile {
 public:
  explicit InFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot read {}: {}", path, std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      const int err = errno;
      ::close(fd_);
      fail("cannot read {}: {}", path, std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd_);
      fail("cannot read {}: it is {}", path, S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~InFile() { ::close(fd_); }
  InFile(const InFile&) = delete;
  InFile& operator=(const InFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  void read_at(uint64_t offset, void* data, size_t n) const {
    char* p = static_cast<char*>(data);
    while (n > 0) {
      const ssize_t k = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) fail("cannot read {}: {}", path_, std::strerror(errno));
      if (k == 0) fail("{} is truncated: it shrank while being read", path_);
      p += k;
      n -= static_cast<size_t>(k);
      offset += static_cast<uint64_t>(k);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The header and directory, validated: the sections tile the file.
struct Layout {
  uint32_t version = 0;
  std::vector<Section> sections;
  const Section& get(SectionKind kind) const {
    return *std::find_if(sections.begin(), sections.end(),
                         [&](const Section& s) { return s.kind == kind; });
  }
};

Layout read_layout(const InFile& f) {
  const std::string& path = f.path();
  std::array<unsigned char, kHeaderBytes> h{};
  const size_t have = static_cast<size_t>(std::min<uint64_t>(f.size(), kHeaderBytes));
  f.read_at(0, h.data(), have);
  if (have == 0) fail("{} is empty, not a tfm checkpoint", path);
  if (std::memcmp(h.data(), kMagic.data(), std::min(have, kMagic.size())) != 0)
    fail("{} is not a tfm checkpoint", path);
  if (have < 12) fail("{} is truncated: it ends inside its header", path);
  Layout layout;
  layout.version = get<uint32_t>(&h[8]);
  if (layout.version != kCheckpointVersion)
    fail("{} is a tfm checkpoint of format version {}, but this tfm reads only version {}", path,
         layout.version, kCheckpointVersion);
  if (have < kHeaderBytes) fail("{} is truncated: it ends inside its header", path);
  if (crc32(0, h.data(), 60) != get<uint32_t>(&h[60]))
    corrupt(path, "its header fails its checksum");
  const uint64_t file_bytes = get<uint64_t>(&h[16]);
  const uint64_t dir_offset = get<uint64_t>(&h[24]), dir_bytes = get<uint64_t>(&h[32]);
  const uint32_t count = get<uint32_t>(&h[40]), dir_crc = get<uint32_t>(&h[44]);
  if (get<uint32_t>(&h[12]) != 0 || std::any_of(&h[48], &h[60], [](unsigned char c) { return c; }))
    corrupt(path, "its header has reserved bytes that are not zero");
  if (f.size() < file_bytes)
    fail("{} is truncated: it has {} bytes, but its header says {}", path, f.size(), file_bytes);
  if (f.size() > file_bytes)
    corrupt(path, "it has {} bytes, but its header says {}", f.size(), file_bytes);
  if (dir_offset < kHeaderBytes || dir_offset > file_bytes || dir_bytes != file_bytes - dir_offset)
    corrupt(path, "its directory does not end the file");

  std::string dir(static_cast<size_t>(dir_bytes), '\0');
  f.read_at(dir_offset, dir.data(), dir.size());
  if (crc32(0, dir.data(), dir.size()) != dir_crc) corrupt(path, "its directory fails its checksum");
  Cursor c(path, "its directory", dir);
  std::set<std::string> names;
  uint64_t next = kHeaderBytes;
  for (uint32_t i = 0; i < count; ++i) {
    Section s;
    s.name = c.name();
    const uint16_t kind = c.get_le<uint16_t>();
    s.codec = c.get_le<uint16_t>();
    s.offset = c.get_le<uint64_t>();
    s.stored = c.get_le<uint64_t>();
    s.raw = c.get_le<uint64_t>();
    s.crc_stored = c.get_le<uint32_t>();
    s.crc_raw = c.get_le<uint32_t>();
    if (kind < 1 || kind > 5)
      fail("{} has a section '{}' of kind {}, which this tfm does not know", path, printable(s.name), kind);
    s.kind = static_cast<SectionKind>(kind);
    if (!names.insert(s.name).second) corrupt(path, "two sections are named '{}'", printable(s.name));
    const bool reserved = is_reserved(s.name);
    if (reserved != (s.kind != SectionKind::extra) ||
        (reserved && s.name != kReserved[kind - 1]))
      corrupt(path, "section '{}' has kind {}, which does not go with its name", printable(s.name), kind);
    if (s.codec != kCodecStored && s.codec != kCodecZstd)
      fail("{} has a section '{}' compressed with codec {}, which this tfm does not know", path,
           printable(s.name), s.codec);
    if (s.offset != next || s.stored > dir_offset - next)
      corrupt(path, "section '{}' does not lie right after the one before it", printable(s.name));
    next += s.stored;
    if (s.codec == kCodecStored ? s.raw != s.stored : s.raw / kZstdMaxRatio > s.stored)
      corrupt(path, "section '{}' claims {} bytes, more than its {} stored bytes can hold", printable(s.name),
              s.raw, s.stored);
    layout.sections.push_back(std::move(s));
  }
  if (c.left() != 0) corrupt(path, "its directory has bytes after its last entry");
  if (next != dir_offset) corrupt(path, "its sections do not reach its directory");
  for (std::string_view name : kReserved)
    if (!names.count(std::string(name))) corrupt(path, "it has no '{}' section", name);
  return layout;
}

// How much to allocate up front for `claimed` bytes coming out of a section
// of `stored` bytes: a corrupt but checksummed claim can exceed the truth by
// the zstd ratio, so beyond a generous bound buffers grow with the data.
size_t initial_capacity(uint64_t claimed, uint64_t stored) {
  return static_cast<size_t>(std::min(claimed, std::max(kTrustedCapacity, stored * 8)));
}

using Sink = std::function<void(const char*, size_t)>;

// Streams a section's decompressed bytes to `sink`, then verifies checksums
// and sizes. The sink never sees more than the directory's raw size.
void stream_section(const InFile& f, const Section& s, const Sink& sink) {
  const std::string& path = f.path();
  std::vector<char> in_buf(static_cast<size_t>(std::min<uint64_t>(s.stored, kChunk)));
  std::vector<char> out_buf(s.codec == kCodecZstd ? kChunk : 0);
  std::unique_ptr<ZSTD_DCtx, ZstdDFree> dctx(s.codec == kCodecZstd ? ZSTD_createDCtx() : nullptr);
  if (s.codec == kCodecZstd && !dctx) fail("cannot read {}: out of memory for zstd", path);
  uint32_t crc_stored = 0, crc_raw = 0;
  uint64_t raw = 0;
  size_t zerr = 0;
  bool frame_done = false, too_long = false, trailing = false;
  auto deliver = [&](const char* p, size_t n) {
    if (n > s.raw - raw) {
      too_long = true;
      return;
    }
    crc_raw = crc32(crc_raw, p, n);
    raw += n;
    sink(p, n);
  };
  for (uint64_t off = 0; off < s.stored;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(s.stored - off, in_buf.size()));
    f.read_at(s.offset + off, in_buf.data(), n);
    off += n;
    crc_stored = crc32(crc_stored, in_buf.data(), n);
    if (zerr || too_long || trailing) continue;  // only finish the stored checksum
    if (s.codec == kCodecStored) {
      deliver(in_buf.data(), n);
      continue;
    }
    ZSTD_inBuffer in{in_buf.data(), n, 0};
    ZSTD_outBuffer out{out_buf.data(), out_buf.size(), 0};
    // Until the input is used up and zstd holds nothing more for us.
    while (!frame_done && !too_long && (in.pos < in.size || out.pos == out.size)) {
      out.pos = 0;
      const size_t ret = ZSTD_decompressStream(dctx.get(), &out, &in);
      if (ZSTD_isError(ret)) {
        zerr = ret;
        break;
      }
      deliver(out_buf.data(), out.pos);
      frame_done = ret == 0;
    }
    trailing = frame_done && in.pos < in.size;
  }
  if (crc_stored != s.crc_stored) corrupt(path, "section '{}' fails its checksum", printable(s.name));
  if (zerr)
    corrupt(path, "section '{}' cannot be decompressed (zstd: {})", printable(s.name), ZSTD_getErrorName(zerr));
  if (trailing) corrupt(path, "section '{}' has bytes after its zstd frame", printable(s.name));
  if (s.codec == kCodecZstd && !frame_done) corrupt(path, "section '{}' ends inside its zstd frame", printable(s.name));
  if (too_long || raw != s.raw)
    corrupt(path, "section '{}' does not decompress to the {} bytes its directory says", printable(s.name),
            s.raw);
  if (crc_raw != s.crc_raw) corrupt(path, "section '{}' fails its checksum", printable(s.name));
}

std::string read_bytes(const InFile& f, const Section& s) {
  std::string out;
  out.reserve(initial_capacity(s.raw, s.stored));
  stream_section(f, s, [&](const char* p, size_t n) { out.append(p, n); });
  return out;
}

std::vector<TensorInfo> parse_table(const std::string& path, const std::string& table,
                                    uint64_t data_bytes) {
  Cursor c(path, "its tensor table", table);
  const uint32_t count = c.get_le<uint32_t>();
  std::vector<TensorInfo> out;
  out.reserve(std::min<size_t>(count, table.size() / 20));  // an entry has >= 20 bytes
  std::set<std::string> names;
  uint64_t end = 0;
  for (uint32_t i = 0; i < count; ++i) {
    TensorInfo t;
    t.name = c.name();
    const uint8_t code = c.get_le<uint8_t>(), rank = c.get_le<uint8_t>();
    const std::optional<DType> dtype = dtype_from_code(code);
    if (!dtype) corrupt(path, "tensor '{}' has unknown dtype code {}", printable(t.name), code);
    t.dtype = *dtype;
    if (rank > Shape::kMaxRank)
      corrupt(path, "tensor '{}' has rank {}, over the limit of {}", printable(t.name), rank, Shape::kMaxRank);
    std::array<int64_t, Shape::kMaxRank> dims{};
    uint64_t need = dtype_size(t.dtype);
    bool overflow = false;
    for (int d = 0; d < rank; ++d) {
      const uint64_t dim = c.get_le<uint64_t>();
      overflow |= dim > uint64_t{INT64_MAX} || __builtin_mul_overflow(need, dim, &need);
      dims[static_cast<size_t>(d)] = static_cast<int64_t>(dim & uint64_t{INT64_MAX});
    }
    t.offset = c.get_le<uint64_t>();
    t.bytes = c.get_le<uint64_t>();
    if (overflow) corrupt(path, "tensor '{}' has a shape too large for any file", printable(t.name));
    t.shape = make_shape(dims.data(), rank);
    if (need != t.bytes)
      corrupt(path, "tensor '{}' is {} {}, which takes {} bytes, but the table says {}", printable(t.name),
              dtype_name(t.dtype), t.shape.str(), need, t.bytes);
    if (!names.insert(t.name).second)
      corrupt(path, "tensor '{}' appears twice in its tensor table", printable(t.name));
    if (t.offset < end) corrupt(path, "tensor '{}' overlaps the tensor before it", printable(t.name));
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
      corrupt(path, "tensor '{}' lies beyond the {} bytes of tensor data", printable(t.name), data_bytes);
    end = t.offset + t.bytes;
    out.push_back(std::move(t));
  }
  if (c.left() != 0) corrupt(path, "its tensor table has bytes after its last tensor");
  return out;
}

CheckpointInfo read_info(const InFile& f, const Layout& layout) {
  CheckpointInfo info;
  info.version = layout.version;
  info.file_bytes = f.size();
  info.config = read_bytes(f, layout.get(SectionKind::config));
  const std::string table = read_bytes(f, layout.get(SectionKind::tensor_table));
  info.tensors = parse_table(f.path(), table, layout.get(SectionKind::tensors).raw);
  for (const Section& s : layout.sections)
    info.sections.push_back({s.name, s.kind, s.stored, s.raw});
  return info;
}

// Hands out the tensor data stream tensor by tensor, skipping gaps.
// begin(i) is called once per tensor in table order, append(i, ...) with its
// bytes in order.
void stream_tensors(const InFile& f, const Layout& layout, const std::vector<TensorInfo>& tensors,
                    const std::function<void(size_t)>& begin,
                    const std::function<void(size_t, const char*, size_t)>& append) {
  size_t i = 0;
  bool started = false;
  uint64_t pos = 0;
  stream_section(f, layout.get(SectionKind::tensors), [&](const char* p, size_t n) {
    while (n > 0) {
      if (i == tensors.size()) return;  // bytes after the last tensor
      const TensorInfo& t = tensors[i];
      if (pos < t.offset) {
        const size_t skip = static_cast<size_t>(std::min<uint64_t>(n, t.offset - pos));
        p += skip, n -= skip, pos += skip;
        continue;
      }
      if (!started) {
        begin(i);
        started = true;
      }
      const size_t take = static_cast<size_t>(std::min<uint64_t>(n, t.offset + t.bytes - pos));
      append(i, p, take);
      p += take, n -= take, pos += take;
      if (pos == t.offset + t.bytes) {
        ++i;
        started = false;
      }
    }
  });
  // The stream held all the bytes it claimed; what is left has none.
  for (; i < tensors.size(); ++i, started = false)
    if (!started) begin(i);
}

}  // namespace

// ---- public API ----

const CheckpointTensor* Checkpoint::find(std::string_view name) const {
  for (const CheckpointTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const std::string* Checkpoint::find_section(std::string_view name) const {
  for (const auto& [n, bytes] : sections)
    if (n == name) return &bytes;
  return nullptr;
}

const TensorInfo* CheckpointInfo::find(std::string_view name) const {
  for (const TensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

// ---- the open checkpoint ----

struct CheckpointReader::File {
  explicit File(const std::string& path) : in(path), layout(read_layout(in)) {}
  const Section& extra(std::string_view name) const {
    for (const Section& s : layout.sections)
      if (s.kind == SectionKind::extra && s.name == name) return s;
    fail("{} has no section named '{}'", in.path(), printable(name));
  }
  InFile in;
  Layout layout;
};

CheckpointReader::CheckpointReader(const std::string& path) : file_(std::make_unique<File>(path)) {
  info_ = read_info(file_->in, file_->layout);
}

CheckpointReader::~CheckpointReader() = default;
CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;
CheckpointReader& CheckpointReader::operator=(CheckpointReader&&) noexcept = default;

const std::string& CheckpointReader::path() const { return file_->in.path(); }

std::string CheckpointReader::tokenizer() const {
  return read_bytes(file_->in, file_->layout.get(SectionKind::tokenizer));
}

Checkpoint CheckpointReader::read_all() const {
  const Layout& layout = file_->layout;
  Checkpoint ckpt;
  ckpt.config = info_.config;
  ckpt.tokenizer = tokenizer();
  const uint64_t stored = layout.get(SectionKind::tensors).stored;
  ckpt.tensors.resize(info_.tensors.size());
  io::stream_tensors(
      file_->in, layout, info_.tensors,
      [&](size_t i) {
        const TensorInfo& t = info_.tensors[i];
        ckpt.tensors[i].name = t.name;
        ckpt.tensors[i].dtype = t.dtype;
        ckpt.tensors[i].shape = t.shape;
        ckpt.tensors[i].data.reserve(initial_capacity(t.bytes, stored));
      },
      [&](size_t i, const char* p, size_t n) {
        const auto* b = reinterpret_cast<const std::byte*>(p);
        ckpt.tensors[i].data.insert(ckpt.tensors[i].data.end(), b, b + n);
      });
  for (const Section& s : layout.sections)
    if (s.kind == SectionKind::extra) ckpt.sections.emplace_back(s.name, read_bytes(file_->in, s));
  return ckpt;
}

void CheckpointReader::read_tensors(const TensorDest& dest) const {
  std::vector<std::span<std::byte>> spans(info_.tensors.size());
  std::vector<uint64_t> filled(info_.tensors.size());
  io::stream_tensors(
      file_->in, file_->layout, info_.tensors,
      [&](size_t i) {
        const TensorInfo& t = info_.tensors[i];
        spans[i] = dest(t);
        if (!spans[i].empty() && spans[i].size() != t.bytes)
          fail("cannot read {}: tensor '{}' has {} bytes, but its destination holds {}", path(),
               printable(t.name), t.bytes, spans[i].size());
      },
      [&](size_t i, const char* p, size_t n) {
        if (spans[i].empty()) return;
        std::memcpy(spans[i].data() + filled[i], p, n);
        filled[i] += n;
      });
}

void CheckpointReader::stream_tensors(const TensorPiece& piece) const {
  std::vector<uint64_t> done(info_.tensors.size());
  io::stream_tensors(
      file_->in, file_->layout, info_.tensors,
      [&](size_t i) {
        if (info_.tensors[i].bytes == 0) piece(info_.tensors[i], 0, {});
      },
      [&](size_t i, const char* p, size_t n) {
        if (n == 0) return;  // an empty tensor, announced by begin
        piece(info_.tensors[i], done[i], {reinterpret_cast<const std::byte*>(p), n});
        done[i] += n;
      });
}

std::string CheckpointReader::section(std::string_view name) const {
  return read_bytes(file_->in, file_->extra(name));
}

void CheckpointReader::stream_section(std::string_view name, const ByteSink& sink) const {
  io::stream_section(file_->in, file_->extra(name), [&](const char* p, size_t n) {
    sink({reinterpret_cast<const std::byte*>(p), n});
  });
}

// ---- one call, one read ----

CheckpointInfo read_checkpoint_info(const std::string& path) { return CheckpointReader(path).info(); }

Checkpoint read_checkpoint(const std::string& path) { return CheckpointReader(path).read_all(); }

void read_checkpoint_tensors(const std::string& path, const TensorDest& dest) {
  CheckpointReader(path).read_tensors(dest);
}

void stream_checkpoint_tensors(const std::string& path, const TensorPiece& piece) {
  CheckpointReader(path).stream_tensors(piece);
}

std::string read_checkpoint_section(const std::string& path, std::string_view name) {
  return CheckpointReader(path).section(name);
}

void stream_checkpoint_section(const std::string& path, std::string_view name,
                               const ByteSink& sink) {
  CheckpointReader(path).stream_section(name, sink);
}

bool is_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<unsigned char, kMagic.size()> head{};
  in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
  return in.gcount() == static_cast<std::streamsize>(head.size()) && head == kMagic;
}

std::string read_checkpoint_tokenizer(const std::string& path) {
  const InFile f(path);
  return read_bytes(f, read_layout(f).get(SectionKind::tokenizer));
}

}  // namespace tfm::io
