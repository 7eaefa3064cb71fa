// Reading numpy's .npy arrays and .npz archives (np.savez, np.savez_compressed:
// a ZIP of NAME.npy entries): Marian's model.npz, whose configuration is
// the entry "special:model.yml", its YAML text as an i8 or u8 array (read
// it with Array::text()).
//
// An .npy entry is the magic "\x93NUMPY", a version (1.0, 2.0 or 3.0), the
// header length (2 bytes for 1.0, 4 after), a header that is a Python dict
// literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }, then
// the data. descr is one of f8 f4 f2 i8 i4 i2 i1 u1 b1 ('<' or '|';
// big-endian '>' is swapped to little-endian); Fortran-ordered data is
// copied into C order. Any failure is one Error naming the file and entry.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "libcore/io/value.h"

namespace tfm::io {

// The arrays in archive order, named without ".npy".
std::vector<NamedArray> read_npz(const std::string& path);
// The same from the archive's bytes; `origin` names it in messages.
std::vector<NamedArray> parse_npz(std::string bytes, const std::string& origin);
// One .npy file's bytes; `what` names it in messages ("model.npz: 'w'").
Array parse_npy(std::string_view bytes, std::string_view what);

}  // namespace tfm::io
