// Fuzz target: the checkpoint reader (libcore/io/checkpoint_read.cc) and
// the one validation every program applies to a model checkpoint
// (libcore/model/model_check.cc). Any input must end in a tfm::Error
// sentence or a checkpoint read whole; any other exception, a crash, a leak
// or undefined behaviour is a finding.
#include <cstdint>

#include "libcore/base/error.h"
#include "libcore/io/checkpoint.h"
#include "libcore/model/model_check.h"
#include "tests/fuzz/memfile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const tfm::fuzz::MemFile file(data, size);
  try {
    const tfm::io::CheckpointReader reader(file.path());
    tfm::checked_model_vocab(file.path(), reader.tokenizer(),
                             tfm::checked_model_config(file.path(), reader.info()));
  } catch (const tfm::Error&) {
  }
  try {
    const tfm::io::Checkpoint c = tfm::io::read_checkpoint(file.path());
    for (const auto& t : c.tensors)
      if (t.data.size() != static_cast<size_t>(t.shape.numel()) * tfm::dtype_size(t.dtype)) __builtin_trap();
  } catch (const tfm::Error&) {
  }
  return 0;
}
