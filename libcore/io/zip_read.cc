#include "libcore/io/zip_read.h"

#include <zlib.h>

#include <algorithm>
#include <climits>

#include "libcore/base/error.h"
#include "libcore/io/crc32.h"
#include "libcore/io/foreign_bytes.h"

namespace tfm::io {

namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;    // "PK\3\4"
constexpr uint32_t kCentralHeader = 0x02014b50;  // "PK\1\2"
constexpr uint32_t kEnd = 0x06054b50;            // "PK\5\6"
constexpr uint32_t kEnd64Locator = 0x07064b50;   // "PK\6\7"
constexpr uint32_t kEnd64 = 0x06064b50;          // "PK\6\6"
constexpr size_t kEndSize = 22, kCentralSize = 46, kLocalSize = 30, kLocatorSize = 20, kEnd64Size = 56;
// Deflate expands at most about 1032:1; an entry that claims more is lying.
constexpr uint64_t kMaxInflation = 1032;

// Little-endian fields at a checked position of the archive.
struct Cursor {
  std::string_view bytes;
  const std::string& origin;
  size_t at;

  void need(size_t n, std::string_view what) const {
    if (at > bytes.size() || n > bytes.size() - at)
      fail("{} is truncated or not a ZIP archive: {} runs past the end of the file", origin, what);
  }
  uint64_t take(size_t n) {
    const uint64_t v = load_le(bytes.data() + at, n);
    at += n;
    return v;
  }
};

}  // namespace

bool looks_like_zip(std::string_view bytes) {
  return bytes.size() >= 4 && (load_le(bytes.data(), 4) == kLocalHeader || load_le(bytes.data(), 4) == kEnd);
}

ZipReader::ZipReader(std::string bytes, std::string origin) : bytes_(std::move(bytes)), origin_(std::move(origin)) {
  read_directory();
}

void ZipReader::read_directory() {
  const std::string_view b = bytes_;
  if (b.size() < kEndSize) fail("{} is not a ZIP archive: it is too short", origin_);
  // The end record is the last 22 bytes plus a comment of up to 64 KiB.
  size_t end = std::string_view::npos;
  const size_t lowest = b.size() - kEndSize > 0xffff ? b.size() - kEndSize - 0xffff : 0;
  for (size_t at = b.size() - kEndSize + 1; at-- > lowest;)
    if (load_le(b.data() + at, 4) == kEnd && at + kEndSize + load_le(b.data() + at + 20, 2) <= b.size()) {
      end = at;
      break;
    }
  if (end == std::string_view::npos)
    fail("{} is truncated or not a ZIP archive: it has no end-of-central-directory record", origin_);
  Cursor c{b, origin_, end + 4};
  const uint64_t disk = c.take(2), directory_disk = c.take(2);
  c.take(2);
  uint64_t count = c.take(2), directory_size = c.take(4), directory_offset = c.take(4);
  if (count == 0xffff || directory_size == 0xffffffff || directory_offset == 0xffffffff) {
    // ZIP64: the locator just before the end record points at the ZIP64 end record.
    if (end < kLocatorSize || load_le(b.data() + end - kLocatorSize, 4) != kEnd64Locator)
      fail("{} is malformed: its end record asks for ZIP64 but there is no ZIP64 locator", origin_);
    Cursor l{b, origin_, end - kLocatorSize + 8};
    Cursor e{b, origin_, static_cast<size_t>(std::min<uint64_t>(l.take(8), SIZE_MAX))};
    e.need(kEnd64Size, "the ZIP64 end record");
    if (e.take(4) != kEnd64) fail("{} is malformed: the ZIP64 end record is not where its locator says", origin_);
    e.at += 8 + 2 + 2 + 4 + 4 + 8;  // size, versions, disks, entries on this disk
    count = e.take(8);
    directory_size = e.take(8);
    directory_offset = e.take(8);
  }
  if (disk != 0 || directory_disk != 0) fail("{} is split over several disks, which is not read", origin_);
  if (directory_offset > b.size() || directory_size > b.size() - directory_offset)
    fail("{} is truncated or malformed: its central directory lies past the end of the file", origin_);
  if (count > directory_size / kCentralSize)
    fail("{} is malformed: {} entries cannot fit in a central directory of {} bytes", origin_, count, directory_size);

  entries_.reserve(count);
  Cursor d{b.substr(0, directory_offset + directory_size), origin_, directory_offset};
  for (uint64_t i = 0; i < count; ++i) {
    d.need(kCentralSize, "the central directory");
    if (d.take(4) != kCentralHeader) fail("{} is malformed: entry {} of the central directory has no signature", origin_, i);
    d.take(4);  // versions
    const uint64_t flags = d.take(2);
    ZipEntry e;
    e.method = static_cast<uint16_t>(d.take(2));
    d.take(4);  // time, date
    e.crc = static_cast<uint32_t>(d.take(4));
    e.compressed_size = d.take(4);
    e.size = d.take(4);
    const size_t name_size = d.take(2), extra_size = d.take(2), comment_size = d.take(2);
    const uint64_t start_disk = d.take(2);
    d.take(6);  // attributes
    e.header_offset = d.take(4);
    d.need(name_size + extra_size + comment_size, "the central directory");
    e.name.assign(b.substr(d.at, name_size));
    const std::string what = fmt::format("{}: entry '{}'", origin_, printable(e.name));
    // The ZIP64 extra field holds, in order, the fields whose 32-bit
    // values are all ones.
    Cursor x{b.substr(0, d.at + name_size + extra_size), origin_, d.at + name_size};
    while (x.at + 4 <= x.bytes.size()) {
      const uint64_t id = x.take(2), size = x.take(2);
      x.need(size, "an extra field");
      if (id == 0x0001) {
        Cursor z{b.substr(0, x.at + size), origin_, x.at};
        const auto wide = [&](uint64_t& field, uint64_t all_ones) {
          if (field != all_ones) return;
          z.need(8, "the ZIP64 extra field");
          field = z.take(8);
        };
        wide(e.size, 0xffffffff);
        wide(e.compressed_size, 0xffffffff);
        wide(e.header_offset, 0xffffffff);
      }
      x.at += size;
    }
    d.at += name_size + extra_size + comment_size;
    if (flags & 1) fail("{} is encrypted, which is not read", what);
    if (e.method != 0 && e.method != 8) fail("{} is compressed with method {} (only stored and deflated are read)", what, e.method);
    if (start_disk != 0 && start_disk != 0xffff) fail("{} starts on another disk", what);
    if (e.method == 0 && e.size != e.compressed_size) fail("{} is stored but its two sizes differ", what);
    if (e.compressed_size > b.size() || e.size > e.compressed_size * kMaxInflation + 1024)
      fail("{} claims sizes the file cannot hold ({} bytes compressed, {} bytes)", what, e.compressed_size, e.size);
    entries_.push_back(std::move(e));
  }
  for (size_t i = 0; i < entries_.size(); ++i)
    if (!by_name_.emplace(entries_[i].name, i).second)
      fail("{} holds two entries named '{}'", origin_, printable(entries_[i].name));
}

const ZipEntry* ZipReader::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

std::string ZipReader::read(const ZipEntry& entry) const {
  const std::string what = fmt::format("{}: entry '{}'", origin_, printable(entry.name));
  const std::string_view b = bytes_;
  Cursor h{b, what, static_cast<size_t>(std::min<uint64_t>(entry.header_offset, SIZE_MAX))};
  h.need(kLocalSize, "its local header");
  if (h.take(4) != kLocalHeader) fail("{} is malformed: its local header is not where the directory says", what);
  h.at += 22;  // versions, flags, method, time, date, CRC, sizes (the directory's are used)
  const size_t name_size = h.take(2), extra_size = h.take(2);
  h.at += name_size + extra_size;
  h.need(entry.compressed_size, "its data");
  const std::string_view packed = b.substr(h.at, entry.compressed_size);
  std::string out;
  if (entry.method == 0) {
    out.assign(packed);
  } else {
    out.resize(entry.size);
    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) fail("{}: zlib could not start inflating", what);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    uint64_t in_left = packed.size(), out_left = out.size();
    int rc = Z_OK;
    // avail_in and avail_out are 32-bit: feed and drain in pieces.
    while (rc == Z_OK) {
      const uInt in_now = static_cast<uInt>(std::min<uint64_t>(in_left, UINT_MAX));
      const uInt out_now = static_cast<uInt>(std::min<uint64_t>(out_left, UINT_MAX));
      z.avail_in = in_now;
      z.avail_out = out_now;
      rc = inflate(&z, Z_NO_FLUSH);
      in_left -= in_now - z.avail_in;
      out_left -= out_now - z.avail_out;
      if (rc == Z_OK && in_now == z.avail_in && out_now == z.avail_out) rc = Z_BUF_ERROR;  // no progress
    }
    inflateEnd(&z);
    if (rc == Z_BUF_ERROR && out_left == 0) fail("{} inflates to more than the {} bytes its directory gives", what, entry.size);
    if (rc != Z_STREAM_END) fail("{} is corrupt: its deflated data is invalid or cut short", what);
    if (out_left != 0) fail("{} inflates to {} bytes, not the {} its directory gives", what, entry.size - out_left, entry.size);
  }
  if (crc32(0, out.data(), out.size()) != entry.crc) fail("{} is corrupt: CRC-32 mismatch", what);
  return out;
}

}  // namespace tfm::io
