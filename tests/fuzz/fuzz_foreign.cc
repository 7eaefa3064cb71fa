// Fuzz target: the readers of other toolkits' files (libcore/io/value.h),
// what tfm-convert hands a user's download: the input's first byte picks
// the reader (JSON, Marian's YAML, safetensors, npz, torch.save), the rest
// is the file. Any input must end in a tfm::Error sentence or a value tree;
// every array of the tree is converted as tfm-convert converts weights.
#include <cstdint>
#include <string>
#include <string_view>

#include "libcore/base/error.h"
#include "libcore/io/json_read.h"
#include "libcore/io/npz.h"
#include "libcore/io/safetensors.h"
#include "libcore/io/torch_read.h"
#include "libcore/io/value.h"
#include "libcore/io/yaml_read.h"

namespace {

// Every array under v read as tfm-convert reads weights (floats) or text.
void touch(const tfm::io::Value& v, int depth = 0) {
  using Kind = tfm::io::Value::Kind;
  if (depth > 64) return;
  switch (v.kind()) {
    case Kind::array:
      if (tfm::io::is_float(v.as_array().type)) (void)v.as_array().to_f32();
      break;
    case Kind::list:
    case Kind::tuple:
      for (const tfm::io::Value& x : v.items()) touch(x, depth + 1);
      break;
    case Kind::dict:
      for (const auto& [k, x] : v.as_dict()) touch(x, depth + 1);
      break;
    default:
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view file(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 5) {
      case 0: touch(tfm::io::parse_json(file, "fuzz.json")); break;
      case 1: touch(tfm::io::parse_yaml(file, "fuzz.yml")); break;
      case 2:
        for (const tfm::io::NamedArray& t : tfm::io::parse_safetensors(file, "fuzz.safetensors").tensors)
          touch(tfm::io::Value::array(t.array));
        break;
      case 3:
        for (const tfm::io::NamedArray& t : tfm::io::parse_npz(std::string(file), "fuzz.npz"))
          touch(tfm::io::Value::array(t.array));
        break;
      default: touch(tfm::io::parse_torch(std::string(file), "fuzz.pt")); break;
    }
  } catch (const tfm::Error&) {
  }
  return 0;
}
