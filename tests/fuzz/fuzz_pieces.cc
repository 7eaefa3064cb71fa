// Fuzz target: tfm-batch's reader of SentencePiece pieces
// (libcore/data/text_pairs.cc over libcore/data/piece_table.cc): lines of
// "SOURCE<TAB>TARGET" pieces, any bytes, looked up in a real vocabulary.
// TFM_FUZZ_SPM names the SentencePiece model (make -f Makefile.data fuzz
// trains one with tfm-tok). The first byte picks --strict and the filter.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "libcore/base/error.h"
#include "libcore/data/piece_table.h"
#include "libcore/data/text_pairs.h"
#include "libcore/data/vocab.h"
#include "tests/fuzz/memfile.h"

namespace {
std::unique_ptr<tfm::Vocab> g_vocab;
std::unique_ptr<tfm::PieceTable> g_pieces;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* spm = std::getenv("TFM_FUZZ_SPM");
  if (spm == nullptr) {
    std::fprintf(stderr, "fuzz_pieces: set TFM_FUZZ_SPM to a SentencePiece model\n");
    std::exit(2);
  }
  g_vocab = std::make_unique<tfm::Vocab>(tfm::Vocab::load(spm));
  g_pieces = std::make_unique<tfm::PieceTable>(tfm::PieceTable::of(*g_vocab));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const tfm::fuzz::MemFile file(data + 1, size - 1);
  tfm::TextFilter filter;
  filter.strict = mode & 1;
  filter.max_len = 1 + (mode >> 1) % 40;
  filter.max_ratio = 1 + (mode >> 4);
  tfm::TextReadOptions read;
  read.threads = 1;
  read.chunk_lines = 1 + (mode >> 3) % 5;
  try {
    const tfm::TextPairs p = tfm::read_tsv_pairs(file.path(), *g_pieces, filter, read);
    if (p.counts.kept != static_cast<int64_t>(p.pairs.size())) __builtin_trap();
    for (size_t i = 0; i < p.pairs.size(); ++i)
      for (const int32_t id : p.pairs.src(i))
        if (id < 0 || id >= g_vocab->size()) __builtin_trap();
  } catch (const tfm::Error&) {
  }
  return 0;
}
