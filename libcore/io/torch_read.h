// Reading torch.save files (fairseq's checkpoint.pt, Hugging Face's
// pytorch_model.bin) into an io::Value, executing nothing.
//
// The format of PyTorch >= 1.6: a ZIP archive ARCHIVE/data.pkl (a pickle,
// read by io::unpickle), ARCHIVE/data/KEY (the storages' bytes) and
// optionally ARCHIVE/byteorder ("little" or "big"). The pickle refers to a
// storage by the persistent id ('storage', torch.FloatStorage, KEY,
// LOCATION, NUMEL): the storage is read once, as a 1-D array, however many
// tensors share it. Tensors (torch._utils._rebuild_tensor_v2,
// _rebuild_tensor, and through them _rebuild_parameter and
// torch._tensor._rebuild_from_type_v2) become arrays copied into C order
// from the storage offset and strides, so views, transposes and shared
// storages all read as what Python shows. torch.Size is a tuple. Storage
// types: Double Float Half BFloat16 Long Int Short Char Byte Bool and
// UntypedStorage (u8). Everything else is what io::unpickle makes of it
// (an argparse.Namespace is an Object whose state holds the options).
//
// The legacy format (torch.save before PyTorch 1.6, or with
// _use_new_zipfile_serialization=False) is refused with a line saying to
// re-save the file with a newer PyTorch. Any failure is one Error naming
// the file.
#pragma once

#include <string>

#include "libcore/io/value.h"

namespace tfm::io {

Value read_torch(const std::string& path);
// The same from the file's bytes; `origin` names it in messages.
Value parse_torch(std::string bytes, const std::string& origin);

}  // namespace tfm::io
