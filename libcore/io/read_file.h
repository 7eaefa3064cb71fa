// Reading a whole input file, the one way every reader does it: a
// directory, a device or a missing file is one Error naming the path ("cannot
// read spm/: it is a directory"), never a stream library's internal error.
#pragma once

#include <string>

namespace tfm::io {

std::string read_file(const std::string& path);

}  // namespace tfm::io
