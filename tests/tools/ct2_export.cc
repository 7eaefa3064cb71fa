// Writes a tfm checkpoint as a CTranslate2 model directory through
// convert::write_ct2 (libcore/convert/ct2.h), for the tests until
// tfm-convert --to ct2 calls it:
//
//   ct2_export CHECKPOINT DIR [--quantization Q] [--ids] [--force]
//
// Exit 0, 1 with one line on stderr for what cannot be written, 2 for bad usage.
#include <cstdio>
#include <string>

#include "libcore/base/error.h"
#include "libcore/convert/ct2.h"

using namespace tfm;

int main(int argc, char** argv) {
  const auto usage = [] {
    std::fprintf(stderr, "usage: ct2_export CHECKPOINT DIR [--quantization Q] [--ids] [--force]\n");
    return 2;
  };
  if (argc < 3 || argv[1][0] == '-' || argv[2][0] == '-') return usage();
  try {
    convert::Ct2Options options;
    for (int i = 3; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "--ids") {
        options.ids = true;
      } else if (flag == "--force") {
        options.replace = true;
      } else if (flag == "--quantization" && i + 1 < argc) {
        options.quantization = convert::parse_ct2_quantization(argv[++i]);
      } else {
        return usage();
      }
    }
    convert::write_ct2(ModelFile(argv[1]), argv[2], options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ct2_export: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
