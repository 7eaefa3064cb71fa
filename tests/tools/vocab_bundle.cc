// Writes a vocabulary bundle (libcore/data/vocab.h, man/tfm.7 "Vocabulary
// bundle") for the tests: what a model importer makes of an OPUS-MT model,
// from two SentencePiece models and a piece table.
//
//   vocab_bundle OUT.tfmvocab SOURCE.model TARGET.model PIECES
//
// PIECES holds one piece a line, the piece of id 0 first (a last line
// without a newline included). Errors are Vocab::from_parts's.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "libcore/base/error.h"
#include "libcore/data/vocab.h"
#include "libcore/io/read_file.h"

using namespace tfm;

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: vocab_bundle OUT.tfmvocab SOURCE.model TARGET.model PIECES\n");
    return 2;
  }
  try {
    const std::string table = io::read_file(argv[4]);
    std::vector<std::string> pieces;
    for (size_t at = 0; at < table.size();) {
      const size_t nl = std::min(table.find('\n', at), table.size());
      pieces.push_back(table.substr(at, nl - at));
      at = nl + 1;
    }
    Vocab::from_parts(io::read_file(argv[2]), io::read_file(argv[3]), std::move(pieces), argv[1])
        .save(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vocab_bundle: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
