// tfm-tree's work (cmd/tfm-tree.cc is only its options): the filters
// between a treebank and parsing as translation.
//
//   clean        treebank trees (any layout) -> one cleaned tree a line
//   words        trees -> their sentences, one a line (the source side)
//   linearize    trees -> their sequences (the target side)
//   delinearize  sequences + the sentences -> trees, repaired (tfm-score's input)
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "libcore/parse/linearize.h"

namespace tfm::parse {

enum class TreeCommand { clean, words, linearize, delinearize };

struct TreeToolOptions {
  TreeCommand command = TreeCommand::clean;
  std::vector<std::string> inputs;  // plain or gzip; none or "-": stdin
  std::string words;                // delinearize: the sentences, one a line, words split by spaces
};

struct TreeToolTotals {
  int64_t trees = 0;     // read (clean, words, linearize) or made (delinearize)
  int64_t dropped = 0;   // clean: trees left with no word, not written
  int64_t repaired = 0;  // delinearize: trees that needed a repair
  Repairs repairs;       // delinearize: the repairs, summed
};

// Runs the command over the inputs in order, one output line per tree
// (delinearize: per input line), streamed to `out`. clean, words and
// linearize read trees by tree.h's grammar, whatever the line breaks;
// delinearize reads one sequence a line and needs as many lines in
// `words`, checked before anything is written. Errors throw Error naming
// FILE:LINE; the trees before a malformed one are written.
TreeToolTotals run_tree_tool(const TreeToolOptions& options, std::FILE* out);

// The line tfm-tree logs when it is done:
// "3914 trees cleaned" / "245 trees, 2 repaired: 1 closer dropped, 3 closers added".
std::string tree_tool_report(const TreeToolOptions& options, const TreeToolTotals& totals);

}  // namespace tfm::parse
