// What tfm-attnviz writes from the weights of libcore/viz/attention.h:
//   json  every stack, layer and head of one sentence, one JSON object:
//         {"source": [...], "target": [...], "target_in": [...],
//          "decoded": bool, "layers": L, "heads": H,
//          "enc": [L][H][S][S], "dec": [L][H][T][T], "cross": [L][H][T][S]}
//   svg   the paper's view of one stack, layer and heads: two columns of
//         tokens, queries left and keys right, a line from each query to
//         each key with the weight as opacity, one colour a head
//   page  one self-contained HTML file (share/attnviz/page.html, compiled
//         in): the paper's view, a heat map of one head and a grid of every
//         layer x head, for every sentence, with the weights inside; no
//         script, style, font or image from anywhere else
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/viz/attention.h"

namespace tfm::viz {

// What the page shows first, and what --svg draws. layer and heads are
// 0-based; empty heads: all of them.
struct View {
  Stack stack = Stack::enc;
  int64_t layer = 0;
  std::vector<int64_t> heads;
  std::string mode = "paper";  // paper, heatmap, grid (the page)
  int64_t sentence = 0;
};

// Error for a layer or head the model does not have.
void check_view(const View& v, int64_t layers, int64_t heads, int64_t sentences);

// digits < 0: every float in its shortest exact form; else that many
// decimals at most (the page's copy).
std::string attention_json(const SentenceAttention& s, int digits = -1);
std::string attention_svg(const SentenceAttention& s, const View& v);
// `title` heads the page (the checkpoint's name).
std::string attention_page(const std::vector<SentenceAttention>& sentences, const View& v,
                           const std::string& title);

// Text for an XML attribute or element (& < > " escaped); the SVG writers'.
std::string xml_escape(std::string_view s);

// The page template as compiled in (viz_page.cc, generated from
// share/attnviz/page.html).
extern const char* const kAttnvizPage;

}  // namespace tfm::viz
