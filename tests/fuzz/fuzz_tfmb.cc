// Fuzz target: the .tfmb corpus reader (libcore/data/corpus.cc). Any input
// must end in a tfm::Error sentence or a corpus whose every pair, id and
// batch lies where the reader promised.
#include <cstdint>

#include "libcore/base/error.h"
#include "libcore/data/corpus.h"
#include "tests/fuzz/memfile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const tfm::fuzz::MemFile file(data, size);
  try {
    const tfm::Corpus c = tfm::Corpus::read(file.path());
    int64_t tokens = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      for (const int32_t id : c.src(i))
        if (id < 0 || id >= c.meta().vocab_size) __builtin_trap();
      for (const int32_t id : c.tgt(i))
        if (id < 0 || id >= c.meta().vocab_size) __builtin_trap();
      tokens += static_cast<int64_t>(c.src(i).size() + c.tgt(i).size());
    }
    if (tokens != c.src_tokens() + c.tgt_tokens()) __builtin_trap();
    size_t covered = 0;
    for (const tfm::BatchRange& b : c.batches()) covered += b.count;
    if (covered != c.size()) __builtin_trap();
    if (c.size() > 0) c.repack(1 + static_cast<int64_t>(size % 997));
  } catch (const tfm::Error&) {
  }
  return 0;
}
