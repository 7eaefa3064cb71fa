// tfm-tree: constituency trees for parsing as translation (the paper's
// section 6.3), as filters between a treebank and the other programs.
//
//   tfm-tree clean wsj_*.mrg > train.trees         one cleaned tree a line, (TOP ...)
//   tfm-tree words train.trees > train.src         the sentences
//   tfm-tree linearize train.trees > train.tgt     (S (NP XX XX )NP (VP XX )VP XX )S
//   tfm-tree delinearize -w test.src test.hyp > test.trees
//   tfm-score -r test.gold.trees -i test.trees --metrics parseval
//
// libcore/parse/ has the rules (cleaning, linearization, the repairs).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "libcore/app/app.h"
#include "libcore/base/log.h"
#include "libcore/parse/tree_tool.h"

namespace {

struct Options {
  tfm::CommonOptions common;
  tfm::parse::TreeToolOptions tree;
};

struct Command {
  const char* name;
  tfm::parse::TreeCommand command;
  const char* help;
};
// One line each: tfm-tree --help lists them (man/tfm-tree.1 has the rules).
const Command kCommands[] = {
    {"clean", tfm::parse::TreeCommand::clean,
     "Treebank trees (any layout) to cleaned trees, one a line: no -NONE-, no function tags, root TOP"},
    {"words", tfm::parse::TreeCommand::words, "Trees to their sentences, one a line, words split by spaces"},
    {"linearize", tfm::parse::TreeCommand::linearize, "Trees to sequences: (L and )L for a constituent, XX a word"},
    {"delinearize", tfm::parse::TreeCommand::delinearize,
     "Sequences to trees of the words of --words, repaired where they do not fit them"},
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "Constituency trees for parsing as translation: clean a treebank, take the sentences\n"
      "(the source side) and linearized trees (the target side) from it, and make trees of\n"
      "decoded sequences again (for tfm-score --metrics parseval). FILE... or stdin to stdout."};
  tfm::add_common_options(app, o.common);
  app.require_subcommand(1);
  for (const Command& c : kCommands) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    sub->fallthrough();
    sub->add_option("FILE", o.tree.inputs, "Input files, plain or gzip (default or '-': stdin)");
    if (c.command == tfm::parse::TreeCommand::delinearize)
      sub->add_option("-w,--words", o.tree.words, "The sentences, one a line, as many as sequences")
          ->required();
    sub->callback([&o, command = c.command] { o.tree.command = command; });
  }

  app.callback([&] {
    const auto& in = o.tree.inputs;
    if (o.tree.words == "-" && (in.empty() || std::find(in.begin(), in.end(), "-") != in.end()))
      throw CLI::ValidationError("--words", "and the sequences cannot both read stdin");
  });

  return tfm::run_program("tfm-tree", app, argc, argv, o.common, [&] {
    const tfm::parse::TreeToolTotals totals = tfm::parse::run_tree_tool(o.tree, stdout);
    tfm::log::info("{}", tfm::parse::tree_tool_report(o.tree, totals));
  });
}
