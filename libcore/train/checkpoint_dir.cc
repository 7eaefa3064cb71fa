#include "libcore/train/checkpoint_dir.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "libcore/error.h"
#include "libcore/io/atomic_file.h"

namespace tfm::train {
namespace fs = std::filesystem;

namespace {

// The step of "checkpoint_<STEP>.bin", or -1 for any other name.
int64_t step_of(const std::string& name) {
  constexpr std::string_view prefix = "checkpoint_", suffix = ".bin";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const char* b = name.data() + prefix.size();
  const char* e = name.data() + name.size() - suffix.size();
  int64_t step = -1;
  const auto [p, ec] = std::from_chars(b, e, step);
  return ec == std::errc() && p == e ? step : -1;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {}: {}", path, std::strerror(errno));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

CheckpointDir::CheckpointDir(std::string dir) : dir_(std::move(dir)) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) fail("cannot create the checkpoint directory {}: {}", dir_, ec.message());
  if (!fs::is_directory(dir_, ec)) fail("{} is not a directory", dir_);
}

std::string CheckpointDir::numbered(int64_t step) const {
  return fmt::format("{}/checkpoint_{}.bin", dir_, step);
}

bool CheckpointDir::has_last() const {
  std::error_code ec;
  return fs::exists(last(), ec);
}

void CheckpointDir::commit(int64_t step, int64_t keep_last) const {
  const std::string target = numbered(step), tmp = last() + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (::link(target.c_str(), tmp.c_str()) == 0) {
    if (std::rename(tmp.c_str(), last().c_str()) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      fail("cannot write {}: {}", last(), std::strerror(err));
    }
  } else {
    // No hard links here: a copy, written just as atomically.
    io::write_file_atomic(last(), read_file(target));
  }
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
    const std::string last = CheckpointDir(dir_or_file).last();
    TFM_REQUIRE(fs::exists(last, ec), "{} holds no checkpoint_last.bin to resume from", dir_or_file);
    return last;
  }
  TFM_REQUIRE(fs::exists(dir_or_file, ec), "cannot resume from {}: no such file or directory",
              dir_or_file);
  return dir_or_file;
}

}  // namespace tfm::train
