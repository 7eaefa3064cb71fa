// The checkpoint directory of a run:
//   checkpoint_<STEP>.bin  numbered checkpoints, the newest --keep-last kept
//   checkpoint_last.bin    the newest of them (a hard link; a copy where the
//                          file system has none), what --resume DIR reads
//   checkpoint_best.bin    the best dev perplexity so far
// Every file appears whole or not at all (temporary file, fsync, rename), so
// a failed write leaves the files before it as they were.
#pragma once

#include <cstdint>
#include <string>

namespace tfm::train {

class CheckpointDir {
 public:
  // Creates the directory (and its parents) when missing.
  explicit CheckpointDir(std::string dir);

  const std::string& dir() const { return dir_; }
  std::string numbered(int64_t step) const;
  std::string last() const { return dir_ + "/checkpoint_last.bin"; }
  std::string best() const { return dir_ + "/checkpoint_best.bin"; }
  bool has_last() const;

  // After numbered(step) is written: makes checkpoint_last.bin that file and
  // removes the numbered checkpoints older than the newest keep_last (0:
  // none).
  void commit(int64_t step, int64_t keep_last) const;

  // What --resume names: a checkpoint file, or a directory's
  // checkpoint_last.bin. Error when there is none.
  static std::string resume_path(const std::string& dir_or_file);

 private:
  std::string dir_;
};

}  // namespace tfm::train
