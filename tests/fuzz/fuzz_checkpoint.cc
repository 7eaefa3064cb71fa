// Fuzz target: the checkpoint reader (libcore/io/checkpoint_read.cc) and
// the one validation every program applies to a model checkpoint
// (libcore/model/model_check.cc), and the reader of the vocabulary bundle a
// checkpoint's tokenizer slot or a .tfmvocab file holds
// (libcore/data/vocab.cc). Any input must end in a tfm::Error sentence or a
// checkpoint read whole; any other exception, a crash, a leak or undefined
// behaviour is a finding.
#include <cstdint>
#include <cstring>
#include <string>

#include "libcore/base/error.h"
#include "libcore/data/vocab.h"
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
  // A bundle's container (only: other bytes would go to SentencePiece's own
  // parser, which is not tfm's; its CRC-32 keeps mutated models from it).
  if (size >= 8 && std::memcmp(data, "\x89TFMVOCB", 8) == 0) {
    try {
      const tfm::Vocab v = tfm::Vocab::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
      if (!v.is_bundle() || v.bytes().size() != size || v.piece(v.unk_id()) != "<unk>") __builtin_trap();
    } catch (const tfm::Error&) {
    }
  }
  return 0;
}
