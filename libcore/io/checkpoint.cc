// Checkpoint writer and reader; the byte layout is man/tfm.7, "CHECKPOINT
// FORMAT". In short: a 64-byte header, the sections back to back (config,
// tokenizer, tensor_table, tensors, then the optional ones), and a section
// directory that ends the file. Every byte lies under a CRC-32.
#include "libcore/io/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <set>

#include "libcore/error.h"

namespace tfm::io {
namespace {

constexpr std::array<unsigned char, 8> kMagic = {0x89, 'T', 'F', 'M', 'C', 'K', 'P', 'T'};
constexpr size_t kHeaderBytes = 64;
constexpr size_t kChunk = size_t{1} << 20;       // read and compress in 1 MiB pieces
constexpr uint64_t kTensorAlign = 64;            // tensor offsets in the decompressed data
constexpr uint64_t kZstdMaxRatio = 32768;        // 128 KiB block from >= 4 stored bytes
constexpr uint64_t kTrustedCapacity = uint64_t{64} << 20;
constexpr uint16_t kCodecStored = 0, kCodecZstd = 1;
constexpr size_t kMaxName = 65535;
constexpr std::array<std::string_view, 4> kReserved = {"config", "tokenizer", "tensor_table",
                                                       "tensors"};

// ---- CRC-32 (ISO-HDLC, as zlib's crc32), slicing by 8 ----

struct CrcTables {
  uint32_t t[8][256];
};
constexpr CrcTables make_crc_tables() {
  CrcTables c{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t r = i;
    for (int k = 0; k < 8; ++k) r = (r >> 1) ^ (0xEDB88320u & (0u - (r & 1u)));
    c.t[0][i] = r;
  }
  for (int k = 1; k < 8; ++k)
    for (int i = 0; i < 256; ++i) c.t[k][i] = (c.t[k - 1][i] >> 8) ^ c.t[0][c.t[k - 1][i] & 0xff];
  return c;
}
constexpr CrcTables kCrc = make_crc_tables();

uint32_t crc32(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    const uint32_t a = crc ^ (uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 |
                              uint32_t{p[3]} << 24);
    const uint32_t b = uint32_t{p[4]} | uint32_t{p[5]} << 8 | uint32_t{p[6]} << 16 |
                       uint32_t{p[7]} << 24;
    crc = kCrc.t[7][a & 0xff] ^ kCrc.t[6][(a >> 8) & 0xff] ^ kCrc.t[5][(a >> 16) & 0xff] ^
          kCrc.t[4][a >> 24] ^ kCrc.t[3][b & 0xff] ^ kCrc.t[2][(b >> 8) & 0xff] ^
          kCrc.t[1][(b >> 16) & 0xff] ^ kCrc.t[0][b >> 24];
  }
  for (; n > 0; --n) crc = kCrc.t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

// ---- little-endian encoding ----

template <typename T>
void put(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((uint64_t{v} >> (8 * i)) & 0xff));
}
void put_name(std::string& out, std::string_view name) {
  put<uint16_t>(out, static_cast<uint16_t>(name.size()));
  out.append(name);
}
template <typename T>
T get(const unsigned char* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t{p[i]} << (8 * i);
  return static_cast<T>(v);
}

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

std::optional<DType> dtype_from_code(uint8_t code) {
  switch (code) {
    case 0: return DType::f32;
    case 1: return DType::f64;
    case 2: return DType::bf16;
    case 3: return DType::f16;
    case 4: return DType::i32;
    default: return std::nullopt;
  }
}
uint8_t dtype_code(DType t) {
  switch (t) {
    case DType::f32: return 0;
    case DType::f64: return 1;
    case DType::bf16: return 2;
    case DType::f16: return 3;
    case DType::i32: return 4;
  }
  return 255;
}

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

bool is_reserved(std::string_view name) {
  return std::find(kReserved.begin(), kReserved.end(), name) != kReserved.end();
}

// One entry of the section directory.
struct Section {
  std::string name;
  SectionKind kind = SectionKind::extra;
  uint16_t codec = kCodecZstd;
  uint64_t offset = 0, stored = 0, raw = 0;
  uint32_t crc_stored = 0, crc_raw = 0;
};

struct ZstdCFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct ZstdDFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// ---- writing ----

// The temporary file beside the target; removed unless commit() succeeds.
class TempFile {
 public:
  explicit TempFile(const std::string& path) : path_(path) {
    static std::atomic<unsigned> counter{0};
    tmp_ = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot write {}: {}", path_, std::strerror(errno));
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  uint64_t pos() const { return pos_; }
  void write(const void* data, size_t n) {
    write_at(pos_, data, n);
    pos_ += n;
  }
  void write_at(uint64_t offset, const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t k = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) fail("cannot write {}: {}", path_, std::strerror(k < 0 ? errno : ENOSPC));
      p += k;
      n -= static_cast<size_t>(k);
      offset += static_cast<uint64_t>(k);
    }
  }
  void commit() {
    if (::fsync(fd_) != 0) fail("cannot write {}: {}", path_, std::strerror(errno));
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) fail("cannot write {}: {}", path_, std::strerror(errno));
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
      fail("cannot write {}: {}", path_, std::strerror(errno));
    committed_ = true;
    const size_t slash = path_.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash + 1);
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {  // make the rename itself durable
      ::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t pos_ = 0;
  bool committed_ = false;
};

// Streams sections into the file, compressing and checksumming as it goes.
class SectionWriter {
 public:
  SectionWriter(TempFile& file, const std::string& path, int level)
      : file_(file), path_(path), level_(level), cctx_(ZSTD_createCCtx()),
        out_(ZSTD_CStreamOutSize()) {
    if (!cctx_) fail("cannot write {}: out of memory for zstd", path_);
  }

  void begin(std::string_view name, SectionKind kind, uint16_t codec, uint64_t raw, int threads) {
    cur_ = Section{std::string(name), kind, codec, file_.pos(), 0, raw, 0, 0};
    if (codec != kCodecZstd) return;
    ZSTD_CCtx* c = cctx_.get();
    check(ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters));
    check(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level_));
    check(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1));
    check(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 1));
    // Worker threads are an optimization: a libzstd built without them says no.
    if (threads > 1) ZSTD_CCtx_setParameter(c, ZSTD_c_nbWorkers, threads);
    check(ZSTD_CCtx_setPledgedSrcSize(c, raw));
  }

  void feed(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const size_t k = std::min(n, kChunk);
      cur_.crc_raw = crc32(cur_.crc_raw, p, k);
      if (cur_.codec == kCodecStored) {
        emit(p, k);
      } else {
        ZSTD_inBuffer in{p, k, 0};
        while (in.pos < in.size) compress(in, ZSTD_e_continue);
      }
      p += k;
      n -= k;
    }
  }

  void end() {
    if (cur_.codec == kCodecZstd) {
      ZSTD_inBuffer in{nullptr, 0, 0};
      while (compress(in, ZSTD_e_end) != 0) {
      }
    }
    entries_.push_back(cur_);
  }

  const std::vector<Section>& entries() const { return entries_; }

 private:
  size_t compress(ZSTD_inBuffer& in, ZSTD_EndDirective mode) {
    ZSTD_outBuffer out{out_.data(), out_.size(), 0};
    const size_t left = check(ZSTD_compressStream2(cctx_.get(), &out, &in, mode));
    emit(out_.data(), out.pos);
    return left;
  }
  void emit(const void* p, size_t n) {
    cur_.crc_stored = crc32(cur_.crc_stored, p, n);
    cur_.stored += n;
    file_.write(p, n);
  }
  size_t check(size_t ret) const {
    if (ZSTD_isError(ret)) fail("cannot write {}: zstd: {}", path_, ZSTD_getErrorName(ret));
    return ret;
  }

  TempFile& file_;
  const std::string& path_;
  int level_;
  std::unique_ptr<ZSTD_CCtx, ZstdCFree> cctx_;
  std::vector<char> out_;
  Section cur_;
  std::vector<Section> entries_;
};

void check_name(const std::string& path, std::string_view what, std::string_view name,
                std::set<std::string_view>& seen) {
  if (name.empty()) fail("cannot write {}: a {} has an empty name", path, what);
  if (name.size() > kMaxName)
    fail("cannot write {}: the {} name '{}...' is over {} bytes", path, what, name.substr(0, 40),
         kMaxName);
  if (!seen.insert(name).second) fail("cannot write {}: two {}s are named '{}'", path, what, name);
}

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
      fail("cannot read {}: it is not a regular file", path);
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
      fail("{} has a section '{}' of kind {}, which this tfm does not know", path, s.name, kind);
    s.kind = static_cast<SectionKind>(kind);
    if (!names.insert(s.name).second) corrupt(path, "two sections are named '{}'", s.name);
    const bool reserved = is_reserved(s.name);
    if (reserved != (s.kind != SectionKind::extra) ||
        (reserved && s.name != kReserved[kind - 1]))
      corrupt(path, "section '{}' has kind {}, which does not go with its name", s.name, kind);
    if (s.codec != kCodecStored && s.codec != kCodecZstd)
      fail("{} has a section '{}' compressed with codec {}, which this tfm does not know", path,
           s.name, s.codec);
    if (s.offset != next || s.stored > dir_offset - next)
      corrupt(path, "section '{}' does not lie right after the one before it", s.name);
    next += s.stored;
    if (s.codec == kCodecStored ? s.raw != s.stored : s.raw / kZstdMaxRatio > s.stored)
      corrupt(path, "section '{}' claims {} bytes, more than its {} stored bytes can hold", s.name,
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
  if (crc_stored != s.crc_stored) corrupt(path, "section '{}' fails its checksum", s.name);
  if (zerr)
    corrupt(path, "section '{}' cannot be decompressed (zstd: {})", s.name, ZSTD_getErrorName(zerr));
  if (trailing) corrupt(path, "section '{}' has bytes after its zstd frame", s.name);
  if (s.codec == kCodecZstd && !frame_done) corrupt(path, "section '{}' ends inside its zstd frame", s.name);
  if (too_long || raw != s.raw)
    corrupt(path, "section '{}' does not decompress to the {} bytes its directory says", s.name,
            s.raw);
  if (crc_raw != s.crc_raw) corrupt(path, "section '{}' fails its checksum", s.name);
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
    if (!dtype) corrupt(path, "tensor '{}' has unknown dtype code {}", t.name, code);
    t.dtype = *dtype;
    if (rank > Shape::kMaxRank)
      corrupt(path, "tensor '{}' has rank {}, over the limit of {}", t.name, rank, Shape::kMaxRank);
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
    if (overflow) corrupt(path, "tensor '{}' has a shape too large for any file", t.name);
    t.shape = make_shape(dims.data(), rank);
    if (need != t.bytes)
      corrupt(path, "tensor '{}' is {} {}, which takes {} bytes, but the table says {}", t.name,
              dtype_name(t.dtype), t.shape.str(), need, t.bytes);
    if (!names.insert(t.name).second)
      corrupt(path, "tensor '{}' appears twice in its tensor table", t.name);
    if (t.offset < end) corrupt(path, "tensor '{}' overlaps the tensor before it", t.name);
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
      corrupt(path, "tensor '{}' lies beyond the {} bytes of tensor data", t.name, data_bytes);
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

void write_checkpoint(const std::string& path, std::string_view config,
                      std::string_view tokenizer, std::span<const NamedTensor> tensors,
                      std::span<const NamedSection> sections,
                      const CheckpointWriteOptions& options) {
  if (options.zstd_level < 1 || options.zstd_level > ZSTD_maxCLevel())
    fail("cannot write {}: zstd level {} is not in 1..{}", path, options.zstd_level,
         ZSTD_maxCLevel());
  if (options.threads < 1) fail("cannot write {}: {} threads is too few", path, options.threads);

  // The tensor table, with offsets aligned in the decompressed data.
  std::string table;
  put<uint32_t>(table, static_cast<uint32_t>(tensors.size()));
  std::set<std::string_view> names;
  uint64_t data_bytes = 0;
  std::vector<uint64_t> offsets;
  for (const NamedTensor& t : tensors) {
    check_name(path, "tensor", t.name, names);
    const TensorView& v = t.view;
    if (v.device() != Device::cpu())
      fail("cannot write {}: tensor '{}' is on {}; checkpoints are written from host memory", path,
           t.name, v.device().str());
    if (v.data() == nullptr && v.numel() != 0)
      fail("cannot write {}: tensor '{}' ({}) has no data", path, t.name, v.str());
    const uint64_t offset = (data_bytes + kTensorAlign - 1) / kTensorAlign * kTensorAlign;
    put_name(table, t.name);
    put<uint8_t>(table, dtype_code(v.dtype()));
    put<uint8_t>(table, static_cast<uint8_t>(v.rank()));
    for (int64_t d : v.shape()) put<uint64_t>(table, static_cast<uint64_t>(d));
    put<uint64_t>(table, offset);
    put<uint64_t>(table, v.bytes());
    offsets.push_back(offset);
    data_bytes = offset + v.bytes();
  }
  std::set<std::string_view> section_names;
  for (const NamedSection& s : sections) {
    check_name(path, "section", s.name, section_names);
    if (is_reserved(s.name))
      fail("cannot write {}: '{}' is a reserved section name", path, s.name);
  }

  TempFile file(path);
  const std::array<char, kHeaderBytes> zeros{};
  file.write(zeros.data(), zeros.size());  // the header, filled in last
  SectionWriter w(file, path, options.zstd_level);
  auto whole = [&](std::string_view name, SectionKind kind, uint16_t codec, std::string_view bytes) {
    w.begin(name, kind, codec, bytes.size(), 1);
    w.feed(bytes.data(), bytes.size());
    w.end();
  };
  // The configuration stays uncompressed: `head -c` shows what model it is.
  whole("config", SectionKind::config, kCodecStored, config);
  whole("tokenizer", SectionKind::tokenizer, kCodecZstd, tokenizer);
  whole("tensor_table", SectionKind::tensor_table, kCodecZstd, table);
  w.begin("tensors", SectionKind::tensors, kCodecZstd, data_bytes, options.threads);
  uint64_t pos = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    w.feed(zeros.data(), static_cast<size_t>(offsets[i] - pos));
    w.feed(tensors[i].view.data(), tensors[i].view.bytes());
    pos = offsets[i] + tensors[i].view.bytes();
  }
  w.end();
  for (const NamedSection& s : sections) whole(s.name, SectionKind::extra, kCodecZstd, s.data);

  std::string dir;
  for (const Section& s : w.entries()) {
    put_name(dir, s.name);
    put<uint16_t>(dir, static_cast<uint16_t>(s.kind));
    put<uint16_t>(dir, s.codec);
    put<uint64_t>(dir, s.offset);
    put<uint64_t>(dir, s.stored);
    put<uint64_t>(dir, s.raw);
    put<uint32_t>(dir, s.crc_stored);
    put<uint32_t>(dir, s.crc_raw);
  }
  const uint64_t dir_offset = file.pos();
  file.write(dir.data(), dir.size());

  std::string header(reinterpret_cast<const char*>(kMagic.data()), kMagic.size());
  put<uint32_t>(header, kCheckpointVersion);
  put<uint32_t>(header, 0);
  put<uint64_t>(header, file.pos());
  put<uint64_t>(header, dir_offset);
  put<uint64_t>(header, dir.size());
  put<uint32_t>(header, static_cast<uint32_t>(w.entries().size()));
  put<uint32_t>(header, crc32(0, dir.data(), dir.size()));
  header.resize(60, '\0');
  put<uint32_t>(header, crc32(0, header.data(), 60));
  file.write_at(0, header.data(), header.size());
  file.commit();
}

void write_checkpoint(const std::string& path, const Checkpoint& ckpt,
                      const CheckpointWriteOptions& options) {
  std::vector<NamedTensor> tensors;
  tensors.reserve(ckpt.tensors.size());
  for (const CheckpointTensor& t : ckpt.tensors) {
    const uint64_t need = static_cast<uint64_t>(t.shape.numel()) * dtype_size(t.dtype);
    if (t.data.size() != need)
      fail("cannot write {}: tensor '{}' is {} {}, which takes {} bytes, but it holds {}", path,
           t.name, dtype_name(t.dtype), t.shape.str(), need, t.data.size());
    tensors.push_back({t.name, TensorView(const_cast<std::byte*>(t.data.data()), t.dtype, t.shape)});
  }
  std::vector<NamedSection> sections;
  for (const auto& [name, bytes] : ckpt.sections) sections.push_back({name, bytes});
  write_checkpoint(path, ckpt.config, ckpt.tokenizer, tensors, sections, options);
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  const InFile f(path);
  return read_info(f, read_layout(f));
}

Checkpoint read_checkpoint(const std::string& path) {
  const InFile f(path);
  const Layout layout = read_layout(f);
  CheckpointInfo info = read_info(f, layout);
  Checkpoint ckpt;
  ckpt.config = std::move(info.config);
  ckpt.tokenizer = read_bytes(f, layout.get(SectionKind::tokenizer));
  const uint64_t stored = layout.get(SectionKind::tensors).stored;
  ckpt.tensors.resize(info.tensors.size());
  stream_tensors(
      f, layout, info.tensors,
      [&](size_t i) {
        const TensorInfo& t = info.tensors[i];
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
    if (s.kind == SectionKind::extra) ckpt.sections.emplace_back(s.name, read_bytes(f, s));
  return ckpt;
}

void read_checkpoint_tensors(const std::string& path,
                             const std::function<std::span<std::byte>(const TensorInfo&)>& dest) {
  const InFile f(path);
  const Layout layout = read_layout(f);
  const CheckpointInfo info = read_info(f, layout);
  std::vector<std::span<std::byte>> spans(info.tensors.size());
  std::vector<uint64_t> filled(info.tensors.size());
  stream_tensors(
      f, layout, info.tensors,
      [&](size_t i) {
        const TensorInfo& t = info.tensors[i];
        spans[i] = dest(t);
        if (!spans[i].empty() && spans[i].size() != t.bytes)
          fail("cannot read {}: tensor '{}' has {} bytes, but its destination holds {}", path,
               t.name, t.bytes, spans[i].size());
      },
      [&](size_t i, const char* p, size_t n) {
        if (spans[i].empty()) return;
        std::memcpy(spans[i].data() + filled[i], p, n);
        filled[i] += n;
      });
}

std::string read_checkpoint_section(const std::string& path, std::string_view name) {
  const InFile f(path);
  const Layout layout = read_layout(f);
  for (const Section& s : layout.sections)
    if (s.kind == SectionKind::extra && s.name == name) return read_bytes(f, s);
  fail("{} has no section named '{}'", path, name);
}

}  // namespace tfm::io
