// Atomic output: a file appears complete or not at all. Content goes to a
// temporary file beside the target, is fsynced, then renamed over it, so a
// crash or an error never leaves a torn or partial file, and an existing
// file is replaced only by a complete one.
#pragma once

#include <string>
#include <string_view>

namespace tfm::io {

// Writes `content` to `path` atomically; throws Error naming the path.
void write_file_atomic(const std::string& path, std::string_view content);

}  // namespace tfm::io
