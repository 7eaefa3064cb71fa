#include "libcore/train/checkpoint_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "libcore/base/error.h"
#include "libcore/base/log.h"
#include "libcore/io/atomic_file.h"
#include "libcore/io/read_file.h"
#include "libcore/train/state.h"

namespace tfm::train {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPrefix = "checkpoint_", kSuffix = ".bin";

// The step of "checkpoint_<STEP>.bin", or -1 for any other name.
int64_t step_of(const std::string& name) {
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.rfind(kPrefix, 0) != 0 ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
    return -1;
  const char* b = name.data() + kPrefix.size();
  const char* e = name.data() + name.size() - kSuffix.size();
  int64_t step = -1;
  const auto [p, ec] = std::from_chars(b, e, step);
  return ec == std::errc() && p == e ? step : -1;
}

// The writer's pid of a temporary checkpoint, "checkpoint_<...>.bin.tmp.<PID>"
// or "....tmp.<PID>.<N>" (io::AtomicFile), or -1 for any other name.
pid_t temporary_pid(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0) return -1;
  const size_t at = name.find(".bin.tmp.");
  if (at == std::string::npos) return -1;
  const char* b = name.data() + at + 9;
  const char* e = name.data() + name.size();
  long pid = -1;
  const auto [p, ec] = std::from_chars(b, e, pid);
  if (ec != std::errc() || pid <= 0 || pid > 0x3fffffff) return -1;
  if (p != e) {  // ".<N>" after the pid
    unsigned long n = 0;
    const auto [q, ec2] = std::from_chars(p + 1, e, n);
    if (*p != '.' || ec2 != std::errc() || q != e) return -1;
  }
  return static_cast<pid_t>(pid);
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

}  // namespace

CheckpointDir::CheckpointDir(std::string dir) : dir_(std::move(dir)) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) fail("cannot create the checkpoint directory {}: {}", dir_, ec.message());
  if (!fs::is_directory(dir_, ec)) fail("{} is not a directory", dir_);
  lock();
  remove_stale_temporaries();
}

CheckpointDir::~CheckpointDir() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

void CheckpointDir::lock() {
  const std::string path = dir_ + "/run.lock";
  lock_fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) fail("cannot lock the run directory {}: {}: {}", dir_, path, std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (err != EWOULDBLOCK)
      fail("cannot lock the run directory {}: {}: {}", dir_, path, std::strerror(err));
    // The holder writes its pid just after it locks: give it a moment.
    std::string holder;
    for (int i = 0; i < 20 && holder.empty(); ++i) {
      try {
        holder = io::read_file(path);
      } catch (const Error&) {
      }
      while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
      if (holder.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    fail("{} is in use: another process (pid {}) is writing a run there, and two would mix "
         "their checkpoints; wait for it to end, or train into another -o",
         dir_, holder.empty() ? "unknown" : printable(holder.substr(0, 20)));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, pid.data(), pid.size(), 0) < 0)
    log::debug("cannot write the pid into {}: {}", path, std::strerror(errno));
}

void CheckpointDir::remove_stale_temporaries() const {
  std::error_code ec;
  int removed = 0;
  for (auto it = fs::directory_iterator(dir_, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const pid_t pid = temporary_pid(name);
    if (pid < 0 || pid == ::getpid() || alive(pid)) continue;
    if (::unlink(it->path().c_str()) == 0) {
      ++removed;
      log::debug("removed {}, left by process {} (no longer running)", it->path().string(), pid);
    }
  }
  if (removed > 0)
    log::info("{}: removed {} temporary checkpoint file{} of a writer that died while writing",
              dir_, removed, removed == 1 ? "" : "s");
}

std::string CheckpointDir::numbered(int64_t step) const {
  return fmt::format("{}/checkpoint_{}.bin", dir_, step);
}

bool CheckpointDir::has_last() const {
  std::error_code ec;
  return fs::exists(last(), ec);
}

bool CheckpointDir::holds_run() const {
  std::error_code ec;
  if (has_last() || fs::exists(best(), ec)) return true;
  for (auto it = fs::directory_iterator(dir_, ec); !ec && it != fs::directory_iterator();
       it.increment(ec))
    if (step_of(it->path().filename().string()) >= 0) return true;
  return false;
}

CheckpointDir::Newest CheckpointDir::newest() const {
  Newest n;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir_, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const int64_t s = step_of(it->path().filename().string());
    if (s > n.step) n = {s, it->path().string()};
  }
  if (has_last()) {
    const int64_t s = read_state(io::CheckpointReader(last())).step;
    if (s > n.step) n = {s, last()};
  }
  return n;
}

void CheckpointDir::commit(int64_t step, int64_t keep_last) const {
  // A file of its own, not a hard link: a checkpoint copied over
  // checkpoint_last.bin (a rollback) must not write into a numbered one.
  io::copy_file_atomic(last(), numbered(step));
  if (keep_last <= 0) return;
  std::vector<int64_t> steps;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir_, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const int64_t s = step_of(it->path().filename().string());
    if (s >= 0) steps.push_back(s);
  }
  std::sort(steps.rbegin(), steps.rend());
  for (size_t i = static_cast<size_t>(keep_last); i < steps.size(); ++i)
    if (steps[i] != step) ::unlink(numbered(steps[i]).c_str());
}

std::string CheckpointDir::resume_path(const std::string& dir_or_file) {
  std::error_code ec;
  if (fs::is_directory(dir_or_file, ec)) {
    std::string dir = dir_or_file;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    const std::string last = dir + "/checkpoint_last.bin";
    TFM_REQUIRE(fs::exists(last, ec), "{} holds no checkpoint_last.bin to resume from", dir_or_file);
    return last;
  }
  TFM_REQUIRE(fs::exists(dir_or_file, ec), "cannot resume from {}: no such file or directory",
              dir_or_file);
  return dir_or_file;
}

}  // namespace tfm::train
