#include "libcore/parse/linearize.h"

#include <vector>

namespace tfm::parse {

std::string linearize(const Tree& tree) {
  const std::vector<Node>& nodes = tree.nodes;
  // A TOP root is left out: its open is the first node, its close the last.
  const bool drop_root = !nodes.empty() && nodes.front().kind == Node::open && nodes.front().label == kRootLabel;
  const size_t begin = drop_root ? 1 : 0, end = drop_root ? nodes.size() - 1 : nodes.size();
  std::vector<const std::string*> labels;  // of the constituents open
  std::string out;
  for (size_t i = begin; i < end; ++i) {
    if (!out.empty()) out += ' ';
    switch (nodes[i].kind) {
      case Node::open:
        out += '(', out += nodes[i].label;
        labels.push_back(&nodes[i].label);
        break;
      case Node::leaf: out += kWordSymbol; break;
      case Node::close:
        out += ')', out += *labels.back();
        labels.pop_back();
        break;
    }
  }
  return out;
}

Repairs& Repairs::operator+=(const Repairs& o) {
  closers_dropped += o.closers_dropped;
  closers_added += o.closers_added;
  words_added += o.words_added;
  words_dropped += o.words_dropped;
  constituents_dropped += o.constituents_dropped;
  return *this;
}

Tree delinearize(std::string_view sequence, std::span<const std::string> words, Repairs* repairs) {
  Repairs r;
  Tree body;  // what goes under the root
  std::vector<Node>& nodes = body.nodes;
  int64_t open = 0;    // constituents open
  size_t places = 0;   // word places
  // 1. Brackets.
  size_t i = 0;
  while (i < sequence.size()) {
    if (sequence[i] == ' ' || sequence[i] == '\t') {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < sequence.size() && sequence[i] != ' ' && sequence[i] != '\t') ++i;
    const std::string_view token = sequence.substr(start, i - start);
    if (token.size() > 1 && token[0] == '(') {
      nodes.push_back({Node::open, std::string(token.substr(1)), {}});
      ++open;
    } else if (token[0] == ')') {
      if (open == 0) {
        ++r.closers_dropped;
      } else {
        nodes.push_back({Node::close, {}, {}});
        --open;
      }
    } else {
      nodes.push_back({Node::leaf, std::string(kWordSymbol), {}});
      ++places;
    }
  }
  for (; open > 0; --open, ++r.closers_added) nodes.push_back({Node::close, {}, {}});

  // 2. Words: as many places as words.
  if (places > words.size()) {
    r.words_dropped = static_cast<int64_t>(places - words.size());
    size_t kept_places = 0, kept = 0;
    for (size_t k = 0; k < nodes.size(); ++k) {
      if (nodes[k].kind == Node::leaf && ++kept_places > words.size()) continue;
      if (kept != k) nodes[kept] = std::move(nodes[k]);
      ++kept;
    }
    nodes.resize(kept);
  } else if (places < words.size()) {
    r.words_added = static_cast<int64_t>(words.size() - places);
    // Before the close of the last top-level constituent, or at the end.
    const size_t at = !nodes.empty() && nodes.back().kind == Node::close ? nodes.size() - 1 : nodes.size();
    nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(at), words.size() - places,
                 Node{Node::leaf, std::string(kWordSymbol), {}});
  }
  size_t w = 0;
  for (Node& n : nodes)
    if (n.kind == Node::leaf) n.word = words[w++];

  // 3. Constituents with no word.
  r.constituents_dropped = remove_empty_constituents(body);
  if (repairs != nullptr) *repairs += r;
  if (nodes.empty()) return body;
  nodes.insert(nodes.begin(), Node{Node::open, std::string(kRootLabel), {}});
  nodes.push_back({Node::close, {}, {}});
  return body;
}

}  // namespace tfm::parse
