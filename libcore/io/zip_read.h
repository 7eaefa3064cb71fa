// Reading ZIP archives (PKWARE's APPNOTE): the container of numpy's .npz
// files and of torch.save's files. Entries stored or deflated (zlib),
// ZIP64 sizes and offsets, every entry's CRC-32 checked when it is read.
// Encrypted entries, other compression methods and archives split over
// several disks are refused.
//
// The archive is held in memory. The central directory is read and checked
// when the reader is made (sizes against the file, before anything is
// allocated); an entry is inflated when asked for. Any failure is one Error
// naming the archive (and the entry).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tfm::io {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflated
  uint32_t crc = 0;
  uint64_t compressed_size = 0;
  uint64_t size = 0;
  uint64_t header_offset = 0;  // of its local header
};

// Whether `bytes` start as a ZIP archive does (a local file header, or
// the end record of an empty archive).
bool looks_like_zip(std::string_view bytes);

class ZipReader {
 public:
  // `origin` names the archive in messages.
  ZipReader(std::string bytes, std::string origin);
  ZipReader(const ZipReader&) = delete;  // the name index points into entries_
  ZipReader& operator=(const ZipReader&) = delete;
  ZipReader(ZipReader&&) = default;

  const std::vector<ZipEntry>& entries() const { return entries_; }  // in directory order
  const ZipEntry* find(std::string_view name) const;                   // or nullptr
  // The entry's bytes, inflated and checked against its CRC-32.
  std::string read(const ZipEntry& entry) const;
  const std::string& origin() const { return origin_; }

 private:
  void read_directory();

  std::string bytes_;
  std::string origin_;
  std::vector<ZipEntry> entries_;
  std::unordered_map<std::string_view, size_t> by_name_;
};

}  // namespace tfm::io
