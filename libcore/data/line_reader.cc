#include "libcore/data/line_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "libcore/base/error.h"

namespace tfm::data {

namespace {
constexpr size_t kReadBytes = size_t{1} << 20;
}  // namespace

struct LineReader::Gzip {
  z_stream z{};
  bool ended = false;  // the current member is complete
  ~Gzip() { inflateEnd(&z); }
};

int64_t input_size(const std::string& path) {
  struct stat st;
  const int rc = path == "-" ? ::fstat(STDIN_FILENO, &st) : ::stat(path.c_str(), &st);
  return rc == 0 && S_ISREG(st.st_mode) ? static_cast<int64_t>(st.st_size) : -1;
}

bool is_stream(const std::string& path) {
  struct stat st;
  const int rc = path == "-" ? ::fstat(STDIN_FILENO, &st) : ::stat(path.c_str(), &st);
  return rc == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode));
}

LineReader::LineReader(const std::string& path) : path_(path) {
  if (path == "-") {
    fd_ = STDIN_FILENO;
    path_ = "<stdin>";
  } else {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot open {}: {}", path, std::strerror(errno));
    owns_fd_ = true;
  }
  struct stat st;
  if (::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) size_ = static_cast<int64_t>(st.st_size);
  // Detect gzip from the first two bytes.
  while (raw_.size() < 2 && !eof_) {
    char tmp[2];
    const ssize_t n = ::read(fd_, tmp, 2 - raw_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      if (owns_fd_) ::close(fd_);
      fail("cannot read {}: {}", path_, std::strerror(err));
    }
    if (n == 0) eof_ = true;
    raw_.append(tmp, static_cast<size_t>(n));
    read_ += n;
  }
  if (raw_.size() == 2 && static_cast<unsigned char>(raw_[0]) == 0x1f &&
      static_cast<unsigned char>(raw_[1]) == 0x8b) {
    gz_ = std::make_unique<Gzip>();
    if (inflateInit2(&gz_->z, 15 + 32) != Z_OK) fail("cannot read {}: zlib failed", path_);
  } else {
    buf_ = std::move(raw_);
    raw_.clear();
  }
}

LineReader::~LineReader() {
  if (owns_fd_) ::close(fd_);
}

bool LineReader::fill() {
  if (pos_ > 0 && pos_ * 2 >= buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  for (;;) {
    if (gz_ && !raw_.empty()) {
      // Inflate what is buffered; stop once some output is there.
      const size_t old = buf_.size();
      buf_.resize(old + kReadBytes);
      auto& z = gz_->z;
      if (gz_->ended) {  // another gzip member follows
        inflateReset(&z);
        gz_->ended = false;
      }
      z.next_in = reinterpret_cast<Bytef*>(raw_.data());
      z.avail_in = static_cast<uInt>(raw_.size());
      z.next_out = reinterpret_cast<Bytef*>(buf_.data() + old);
      z.avail_out = static_cast<uInt>(kReadBytes);
      const int rc = inflate(&z, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
        fail("{} is not a valid gzip file: {}", path_, z.msg ? z.msg : "corrupt data");
      if (rc == Z_STREAM_END) gz_->ended = true;
      raw_.erase(0, raw_.size() - z.avail_in);
      buf_.resize(old + kReadBytes - z.avail_out);
      if (buf_.size() > old) return true;
      if (!raw_.empty() && rc != Z_BUF_ERROR) continue;
    }
    if (eof_) {
      if (gz_ && !gz_->ended) fail("{} is not a valid gzip file: it ends early", path_);
      return false;
    }
    std::string& dest = gz_ ? raw_ : buf_;
    const size_t old = dest.size();
    dest.resize(old + kReadBytes);
    ssize_t n;
    do n = ::read(fd_, dest.data() + old, kReadBytes);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
      dest.resize(old);
      fail("cannot read {}: {}", path_, std::strerror(errno));
    }
    dest.resize(old + static_cast<size_t>(n));
    read_ += n;
    if (n == 0) eof_ = true;
    if (!gz_ && n > 0) return true;
  }
}

int64_t LineReader::position() const {
  if (gz_) return read_ - static_cast<int64_t>(raw_.size());
  return read_ - static_cast<int64_t>(buf_.size() - pos_);
}

bool LineReader::take_line(std::string& line, bool at_end) {
  const size_t nl = buf_.find('\n', pos_);
  if (nl == std::string::npos) {
    if (!at_end || pos_ >= buf_.size()) return false;
    line.assign(buf_, pos_, std::string::npos);
    pos_ = buf_.size();
  } else {
    line.assign(buf_, pos_, nl - pos_);
    pos_ = nl + 1;
  }
  ++line_number_;
  return true;
}

bool LineReader::next(std::string& line) {
  for (;;) {
    if (take_line(line, false)) return true;
    if (!fill()) return take_line(line, true);
  }
}

size_t LineReader::next_chunk(std::vector<std::string>& lines, size_t max_lines) {
  size_t n = 0;
  std::string line;
  for (;;) {
    while (n < max_lines && take_line(line, false)) {
      lines.push_back(std::move(line));
      ++n;
    }
    if (n == max_lines) return n;
    if (n > 0 && !gz_ && !eof_) {
      // Return what we have rather than wait on a pipe that has nothing yet.
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 0) == 0) return n;
    }
    if (!fill()) {
      if (take_line(line, true)) {
        lines.push_back(std::move(line));
        ++n;
      }
      return n;
    }
  }
}

size_t LineReader::next_block(std::string& block, size_t max_lines) {
  size_t n = 0, scanned = 0;  // lines found in buf_[pos_, pos_ + scanned)
  bool add_newline = false;
  while (n < max_lines) {
    const char* at = buf_.data() + pos_ + scanned;
    const void* nl = std::memchr(at, '\n', buf_.size() - pos_ - scanned);
    if (nl) {
      scanned += static_cast<size_t>(static_cast<const char*>(nl) - at) + 1;
      ++n;
      continue;
    }
    if (fill()) continue;  // may move the unreturned bytes to the front: pos_ changes
    if (pos_ + scanned < buf_.size()) {  // a last line without '\n'
      scanned = buf_.size() - pos_;
      add_newline = true;
      ++n;
    }
    break;
  }
  block.assign(buf_, pos_, scanned);
  if (add_newline) block += '\n';
  pos_ += scanned;
  line_number_ += static_cast<int64_t>(n);
  return n;
}

}  // namespace tfm::data
