#include "libcore/io/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "libcore/base/error.h"

namespace tfm::io {

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot read {}: {}", path, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail("cannot read {}: {}", path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail("cannot read {}: it is a directory", path);
  if (!S_ISREG(st.st_mode)) fail("cannot read {}: it is not a regular file", path);
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot read {}: {}", path, std::strerror(errno));
    if (n == 0) fail("{} is truncated: it shrank while being read", path);
    done += static_cast<size_t>(n);
  }
  return bytes;
}

}  // namespace tfm::io
