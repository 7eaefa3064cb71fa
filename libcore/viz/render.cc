#include "libcore/viz/render.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "libcore/base/error.h"
#include "libcore/base/json.h"

namespace tfm::viz {

namespace {

// A weight with at most `digits` decimals, trailing zeros dropped.
std::string rounded(float v, int digits) {
  std::string s = fmt::format("{:.{}f}", static_cast<double>(v), digits);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

void tokens(JsonWriter& j, std::string_view key, const std::vector<std::string>& t) {
  j.key(key).begin_array();
  for (const std::string& p : t) j.value(p);
  j.end_array();
}

// [L][H][Tq][Tk], built as text: the writer's per-number overhead adds up
// over a page of maps.
std::string maps_json(const SentenceAttention& s, Stack stack, int digits) {
  const int64_t Tq = s.queries(stack), Tk = s.keys(stack);
  std::string out = "[";
  for (int64_t l = 0; l < s.layers; ++l) {
    out += l ? ",[" : "[";
    for (int64_t h = 0; h < s.heads; ++h) {
      out += h ? ",[" : "[";
      const float* m = s.map(stack, l, h);
      for (int64_t i = 0; i < Tq; ++i) {
        out += i ? ",[" : "[";
        for (int64_t j = 0; j < Tk; ++j) {
          if (j) out += ',';
          const float w = m[i * Tk + j];
          out += digits < 0 ? fmt::format("{}", w) : rounded(w, digits);
        }
        out += ']';
      }
      out += ']';
    }
    out += ']';
  }
  return out + "]";
}


// Characters a label takes, counting a UTF-8 sequence as one.
int64_t glyphs(std::string_view s) {
  return std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

// One hue a head, spread around the circle (the page uses the same).
std::string head_colour(int64_t h, int64_t heads) {
  return fmt::format("hsl({},75%,42%)", (h * 360) / std::max<int64_t>(heads, 1));
}

std::string replace_once(std::string text, std::string_view what, std::string_view with) {
  const size_t at = text.find(what);
  TFM_REQUIRE(at != std::string::npos, "internal: the page template has no {}", what);
  return text.replace(at, what.size(), with);
}

}  // namespace

std::string xml_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

void check_view(const View& v, int64_t layers, int64_t heads, int64_t sentences) {
  TFM_REQUIRE(v.layer >= 0 && v.layer < layers, "--layer {}: the model has layers 1 to {}", v.layer + 1, layers);
  for (int64_t h : v.heads)
    TFM_REQUIRE(h >= 0 && h < heads, "--heads: head {} is not one of the model's heads 1 to {}", h + 1, heads);
  TFM_REQUIRE(v.sentence >= 0 && v.sentence < sentences, "--sentence {}: there are sentences 1 to {}",
              v.sentence + 1, sentences);
}

std::string attention_json(const SentenceAttention& s, int digits) {
  JsonWriter j;
  j.begin_object();
  tokens(j, "source", s.source);
  tokens(j, "target", s.target);
  tokens(j, "target_in", s.target_in);
  j.field("decoded", s.decoded).field("layers", s.layers).field("heads", s.heads);
  j.end_object();
  std::string out = j.str();
  out.pop_back();  // the closing brace: the maps follow
  for (Stack st : kStacks) out += fmt::format(",\"{}\":{}", stack_name(st), maps_json(s, st, digits));
  return out + "}";
}

std::string attention_svg(const SentenceAttention& s, const View& v) {
  View one = v;  // s is the chosen sentence
  one.sentence = 0;
  check_view(one, s.layers, s.heads, 1);
  std::vector<int64_t> heads = v.heads;
  if (heads.empty())
    for (int64_t h = 0; h < s.heads; ++h) heads.push_back(h);
  const std::vector<std::string>& q = s.query_tokens(v.stack);
  const std::vector<std::string>& k = s.key_tokens(v.stack);
  const int64_t Tq = s.queries(v.stack), Tk = s.keys(v.stack);
  // Geometry: 7.5 px a glyph at 13 px, 20 px a row, a title line on top.
  int64_t wq = 0, wk = 0;
  for (const auto& t : q) wq = std::max(wq, glyphs(t));
  for (const auto& t : k) wk = std::max(wk, glyphs(t));
  const double cw = 7.5, row = 20, top = 40, gap = 160;
  const double xq = 10 + static_cast<double>(wq) * cw, xk = xq + gap;
  const double width = xk + static_cast<double>(wk) * cw + 10;
  const double height = top + static_cast<double>(std::max(Tq, Tk)) * row + 10;
  const char* names[] = {"encoder self-attention", "decoder self-attention", "encoder-decoder attention"};
  std::string head_list;
  for (int64_t h : heads) head_list += fmt::format("{}{}", head_list.empty() ? "" : ", ", h + 1);
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"13\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"18\" font-weight=\"bold\">{}, layer {}, head{} {}</text>\n",
      std::max(width, 320.0), height, std::max(width, 320.0), height,
      names[static_cast<int>(v.stack)], v.layer + 1, heads.size() > 1 ? "s" : "", head_list);
  auto y = [&](int64_t i) { return top + static_cast<double>(i) * row; };
  for (int64_t h : heads) {
    const float* m = s.map(v.stack, v.layer, h);
    out += fmt::format("<g stroke=\"{}\" stroke-width=\"2\" class=\"head\" data-head=\"{}\">\n",
                       head_colour(h, s.heads), h + 1);
    for (int64_t i = 0; i < Tq; ++i)
      for (int64_t j = 0; j < Tk; ++j) {
        const float w = m[i * Tk + j];
        if (w < 0.01f) continue;  // invisible at that opacity
        out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke-opacity=\"{}\"/>\n",
                           xq + 5, y(i) - 4, xk - 5, y(j) - 4, rounded(w, 3));
      }
    out += "</g>\n";
  }
  for (int64_t i = 0; i < Tq; ++i)
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", xq, y(i),
                       xml_escape(q[static_cast<size_t>(i)]));
  for (int64_t j = 0; j < Tk; ++j)
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", xk, y(j), xml_escape(k[static_cast<size_t>(j)]));
  return out + "</svg>\n";
}

std::string attention_page(const std::vector<SentenceAttention>& sentences, const View& v,
                           const std::string& title) {
  TFM_REQUIRE(!sentences.empty(), "internal: a page of no sentences");
  check_view(v, sentences.front().layers, sentences.front().heads, static_cast<int64_t>(sentences.size()));
  JsonWriter j;
  j.begin_object().field("title", title).field("stack", stack_name(v.stack)).field("layer", v.layer)
      .field("mode", v.mode).field("sentence", v.sentence);
  j.key("heads").begin_array();
  for (int64_t h : v.heads) j.value(h);
  j.end_array().end_object();
  std::string data = j.str();
  data.pop_back();
  data += ",\"sentences\":[";
  for (size_t i = 0; i < sentences.size(); ++i) {
    if (i) data += ',';
    data += attention_json(sentences[i], 4);
  }
  data += "]}";
  // Inside <script>: no "</script>" or "<!--" may appear, so every '<'
  // (only ever inside a JSON string) is written as its escape.
  std::string safe;
  safe.reserve(data.size());
  for (char c : data) {
    if (c == '<')
      safe += "\\u003c";
    else
      safe += c;
  }
  std::string page = replace_once(kAttnvizPage, "__TFM_DATA__", safe);
  return replace_once(std::move(page), "__TFM_TITLE__", xml_escape(title));
}

}  // namespace tfm::viz
