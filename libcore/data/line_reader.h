// Reading text line by line from a file or stdin ("-"), plain or gzip
// (detected by its magic bytes, not by the name; concatenated gzip members
// are read as one stream). Lines are returned without their '\n'; a last
// line without one is still a line. Memory is bounded by the longest line
// plus one read buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tfm::data {

// The bytes of `path` ("-": stdin) when it is a regular file, else -1;
// reads nothing.
int64_t input_size(const std::string& path);

// Whether `path` ("-": stdin) is a stream: a pipe, a FIFO, a terminal or a
// socket, whose bytes a second open would not give again. Reads nothing.
bool is_stream(const std::string& path);

class LineReader {
 public:
  // Opens `path` ("-" is stdin); throws Error naming it when it cannot.
  explicit LineReader(const std::string& path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Reads the next line into `line`; false at the end of the input.
  bool next(std::string& line);

  // Appends up to `max_lines` lines to `lines`. Blocks only until at least
  // one line is there: when the input is a pipe that has no more data yet,
  // it returns what it has (so a filter stays interactive). Returns the
  // number appended; 0 at the end of the input.
  size_t next_chunk(std::vector<std::string>& lines, size_t max_lines);

  // Replaces `block` with up to `max_lines` whole lines, each ending in
  // '\n' (one is added to a last line that has none). Waits for the lines
  // or the end of the input. Returns the number of lines; 0 at the end.
  size_t next_block(std::string& block, size_t max_lines);

  const std::string& path() const { return path_; }
  // Lines returned so far (the 1-based number of the last one).
  int64_t line_number() const { return line_number_; }
  // For progress: the bytes of the input (compressed, for gzip) when it is
  // a regular file, else -1; and how far into them the lines returned so
  // far reach (gzip: the bytes inflated so far, a read ahead).
  int64_t size() const { return size_; }
  int64_t position() const;

 private:
  bool fill();  // more bytes into buf_; false at the end
  bool take_line(std::string& line, bool at_end);

  struct Gzip;
  std::string path_;
  int fd_ = -1;
  bool owns_fd_ = false;
  bool eof_ = false;
  std::unique_ptr<Gzip> gz_;
  std::string raw_;  // bytes read but not yet inflated (gzip only)
  std::string buf_;  // decoded bytes not yet returned
  size_t pos_ = 0;   // start of the unreturned part of buf_
  int64_t line_number_ = 0;
  int64_t size_ = -1;
  int64_t read_ = 0;  // bytes read from fd_
};

}  // namespace tfm::data
