// The checkpoint directory of a run, and the rule every writer of a run
// follows:
//   checkpoint_<STEP>.bin  numbered checkpoints, the newest --keep-last kept
//   checkpoint_last.bin    the newest checkpoint, what --resume DIR reads;
//                          written first, then copied (a reflink where the
//                          file system shares blocks) as its numbered name,
//                          so no numbered checkpoint is ever newer. Never a
//                          hard link: copying an older checkpoint over it
//                          (a rollback) must leave the numbered ones whole
//   checkpoint_best.bin    the best dev perplexity so far
//   run.lock               flock(2)ed by the one process writing the run,
//                          and holding its pid
// Every file appears whole or not at all (temporary file, fsync, rename), so
// a failed write leaves the files before it as they were. A process killed
// while writing leaves its temporary file (checkpoint_*.tmp.PID.N); the next
// writer of the directory removes those of processes no longer alive.
#pragma once

#include <cstdint>
#include <string>

namespace tfm::train {

class CheckpointDir {
 public:
  // Creates the directory (and its parents) when missing and takes its
  // lock: Error naming the holder's pid when another process writes the
  // run. Then removes the temporary files that dead writers left.
  explicit CheckpointDir(std::string dir);
  ~CheckpointDir();
  CheckpointDir(const CheckpointDir&) = delete;
  CheckpointDir& operator=(const CheckpointDir&) = delete;

  const std::string& dir() const { return dir_; }
  std::string numbered(int64_t step) const;
  std::string last() const { return dir_ + "/checkpoint_last.bin"; }
  std::string best() const { return dir_ + "/checkpoint_best.bin"; }
  bool has_last() const;
  // Whether any checkpoint of a run is here (last, best or numbered).
  bool holds_run() const;
  // The newest update a checkpoint here holds (the numbered names, and
  // checkpoint_last.bin's training state), and which file; -1 when none.
  struct Newest {
    int64_t step = -1;
    std::string path;
  };
  Newest newest() const;

  // After checkpoint_last.bin is written for `step`: copies it as
  // numbered(step) and removes the numbered checkpoints older than the
  // newest keep_last (0: none).
  void commit(int64_t step, int64_t keep_last) const;

  // What --resume names: a checkpoint file, or a directory's
  // checkpoint_last.bin. Error when there is none. Takes no lock.
  static std::string resume_path(const std::string& dir_or_file);

 private:
  void lock();
  void remove_stale_temporaries() const;

  std::string dir_;
  int lock_fd_ = -1;
};

}  // namespace tfm::train
