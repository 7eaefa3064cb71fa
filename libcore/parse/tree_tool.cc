#include "libcore/parse/tree_tool.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "libcore/base/error.h"
#include "libcore/data/line_reader.h"

namespace tfm::parse {

namespace {

void write_line(std::FILE* out, std::string line) {
  line += '\n';
  if (std::fwrite(line.data(), 1, line.size(), out) != line.size())
    fail("cannot write the output: {}", std::strerror(errno));
}

std::vector<std::string> read_lines(const std::string& path) {
  data::LineReader reader(path);
  std::vector<std::string> lines;
  std::string line;
  while (reader.next(line)) lines.push_back(std::move(line));
  return lines;
}

std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] == ' ' || line[i] == '\t') {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    words.emplace_back(line, start, i - start);
  }
  return words;
}

std::string shown(const std::string& path) { return path == "-" ? "stdin" : path; }

void delinearize_files(const TreeToolOptions& o, std::FILE* out, TreeToolTotals& totals) {
  TFM_REQUIRE(!o.words.empty(), "delinearize needs the sentences (--words FILE)");
  const std::vector<std::string> sentences = read_lines(o.words);
  std::vector<std::pair<std::string, std::vector<std::string>>> inputs;  // name, lines
  size_t lines = 0;
  for (const std::string& path : o.inputs) {
    inputs.emplace_back(shown(path), read_lines(path));
    lines += inputs.back().second.size();
  }
  TFM_REQUIRE(lines == sentences.size(), "{} sequences but {} sentences in {}: one sentence a sequence", lines,
              sentences.size(), shown(o.words));
  size_t s = 0;
  for (const auto& [name, sequences] : inputs)
    for (const std::string& sequence : sequences) {
      Repairs r;
      const Tree tree = delinearize(sequence, split_words(sentences[s++]), &r);
      ++totals.trees;
      totals.repaired += r.any();
      totals.repairs += r;
      write_line(out, format_tree(tree));
    }
}

}  // namespace

TreeToolTotals run_tree_tool(const TreeToolOptions& options, std::FILE* out) {
  TreeToolOptions o = options;
  if (o.inputs.empty()) o.inputs.push_back("-");
  TreeToolTotals totals;
  if (o.command == TreeCommand::delinearize) {
    delinearize_files(o, out, totals);
  } else {
    for (const std::string& path : o.inputs) {
      TreeReader reader(path);
      Tree tree;
      while (reader.next(tree)) {
        ++totals.trees;
        switch (o.command) {
          case TreeCommand::clean: {
            const Tree clean = clean_tree(tree);
            if (clean.empty()) ++totals.dropped;
            else write_line(out, format_tree(clean));
            break;
          }
          case TreeCommand::words: write_line(out, tree_sentence(tree)); break;
          case TreeCommand::linearize: write_line(out, linearize(tree)); break;
          case TreeCommand::delinearize: break;
        }
      }
    }
  }
  if (std::fflush(out) != 0) fail("cannot write the output: {}", std::strerror(errno));
  return totals;
}

std::string tree_tool_report(const TreeToolOptions& options, const TreeToolTotals& t) {
  switch (options.command) {
    case TreeCommand::clean:
      return t.dropped == 0 ? fmt::format("{} trees cleaned", t.trees)
                            : fmt::format("{} trees cleaned, {} left out (no word left)", t.trees, t.dropped);
    case TreeCommand::words: return fmt::format("{} sentences", t.trees);
    case TreeCommand::linearize: return fmt::format("{} trees linearized", t.trees);
    case TreeCommand::delinearize: {
      std::string out = fmt::format("{} trees, {} repaired", t.trees, t.repaired);
      if (t.repaired == 0) return out;
      const Repairs& r = t.repairs;
      const std::pair<int64_t, const char*> parts[] = {
          {r.closers_dropped, "closing brackets dropped"}, {r.closers_added, "closing brackets added"},
          {r.words_added, "words added"}, {r.words_dropped, "words dropped"},
          {r.constituents_dropped, "empty constituents removed"}};
      const char* sep = ": ";
      for (const auto& [n, what] : parts)
        if (n > 0) out += fmt::format("{}{} {}", sep, n, what), sep = ", ";
      return out;
    }
  }
  return {};
}

}  // namespace tfm::parse
