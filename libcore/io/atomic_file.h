// Atomic output: a file appears complete or not at all. Content goes to a
// temporary file beside the target, is fsynced, then renamed over it, so a
// crash or an error never leaves a torn or partial file, and an existing
// file is replaced only by a complete one. A target that exists and is no
// regular file (/dev/null, /dev/stdout, a FIFO) is written in place, as it
// comes: a rename would replace the device or pipe itself (as root,
// /dev/null became a regular file holding a benchmark's table), and there
// is no partial file to avoid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tfm::io {

// Writes `content` to `path` atomically; throws Error naming the path.
void write_file_atomic(const std::string& path, std::string_view content);
// Copies the file `from` to `to` atomically (AtomicFile::append_file).
void copy_file_atomic(const std::string& from, const std::string& to);

// The same for a file written in pieces (a header filled in last, blocks
// streamed as they are made). Nothing appears at `path` before commit(); the
// temporary file is removed when the object dies uncommitted (an error).
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Bytes written so far at the end (write() appends there).
  uint64_t pos() const { return pos_; }
  void write(const void* data, size_t n);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // Overwrites or extends at `offset`; pos() is unchanged.
  void write_at(uint64_t offset, const void* data, size_t n);
  // Appends the whole of the file at `path`: a reflink (FICLONE) where the
  // file system shares blocks, copy_file_range otherwise, plain reads and
  // writes where neither works.
  void append_file(const std::string& path);
  // Asks the kernel to start writing what is there to disk, so that the
  // fsync in commit() has less left to wait for. Optional; never fails.
  void start_writeback();
  // fsync, rename over the target, fsync its directory.
  void commit();

 private:
  std::string path_, tmp_;  // tmp_ empty: written in place (no regular file)
  int fd_ = -1;
  uint64_t pos_ = 0, written_back_ = 0;
  bool committed_ = false;
  bool seekable_ = true;  // false: in place on a pipe or terminal (write() in order)
};

}  // namespace tfm::io
