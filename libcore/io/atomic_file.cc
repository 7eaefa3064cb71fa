#include "libcore/io/atomic_file.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "libcore/base/error.h"

namespace tfm::io {

AtomicFile::AtomicFile(const std::string& path) : path_(path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot write {}: {}", path_, std::strerror(errno));
    seekable_ = ::lseek(fd_, 0, SEEK_CUR) >= 0;
    return;
  }
  static std::atomic<unsigned> counter{0};
  tmp_ = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot write {}: {}", path_, std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t n) {
  write_at(pos_, data, n);
  pos_ += n;
}

void AtomicFile::write_at(uint64_t offset, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  // A pipe or a terminal takes no pwrite(): its bytes in order, by write().
  if (!seekable_ && offset != pos_)
    fail("cannot write {}: a pipe or terminal takes its bytes in order only", path_);
  while (n > 0) {
    const ssize_t k = seekable_ ? ::pwrite(fd_, p, n, static_cast<off_t>(offset)) : ::write(fd_, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) fail("cannot write {}: {}", path_, std::strerror(k < 0 ? errno : ENOSPC));
    p += k;
    n -= static_cast<size_t>(k);
    offset += static_cast<uint64_t>(k);
  }
}

void AtomicFile::append_file(const std::string& path) {
  const int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) fail("cannot read {}: {}", path, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{in};
  struct stat st {};
  if (::fstat(in, &st) != 0) fail("cannot read {}: {}", path, std::strerror(errno));
  const auto bytes = static_cast<uint64_t>(st.st_size);
  if (pos_ == 0 && ::ioctl(fd_, FICLONE, in) == 0) {  // shares the blocks: no copy at all
    pos_ = bytes;
    return;
  }
  uint64_t done = 0;
  while (done < bytes) {
    loff_t from = static_cast<loff_t>(done), to = static_cast<loff_t>(pos_);
    const ssize_t n = ::copy_file_range(in, &from, fd_, &to, bytes - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // not here (another file system, an old kernel): plain copy below
    done += static_cast<uint64_t>(n);
    pos_ += static_cast<uint64_t>(n);
  }
  std::string buf(std::min<uint64_t>(bytes - done, uint64_t{4} << 20), '\0');
  while (done < bytes) {
    const ssize_t n = ::pread(in, buf.data(), std::min<uint64_t>(buf.size(), bytes - done),
                              static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot read {}: {}", path, std::strerror(errno));
    if (n == 0) fail("{} is truncated: it shrank while being read", path);
    write(buf.data(), static_cast<size_t>(n));
    done += static_cast<uint64_t>(n);
  }
}

void AtomicFile::start_writeback() {
#ifdef SYNC_FILE_RANGE_WRITE
  if (pos_ > written_back_)
    ::sync_file_range(fd_, static_cast<off_t>(written_back_),
                      static_cast<off_t>(pos_ - written_back_), SYNC_FILE_RANGE_WRITE);
  written_back_ = pos_;
#endif
}

void AtomicFile::commit() {
  if (tmp_.empty()) {  // in place: nothing to rename, and devices and pipes take no fsync
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) fail("cannot write {}: {}", path_, std::strerror(errno));
    committed_ = true;
    return;
  }
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

void write_file_atomic(const std::string& path, std::string_view content) {
  AtomicFile file(path);
  file.write(content);
  file.commit();
}

void copy_file_atomic(const std::string& from, const std::string& to) {
  AtomicFile file(to);
  file.append_file(from);
  file.commit();
}

}  // namespace tfm::io
