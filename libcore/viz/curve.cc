#include "libcore/viz/curve.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "libcore/base/error.h"
#include "libcore/data/line_reader.h"
#include "libcore/viz/render.h"

namespace tfm::viz {
namespace {

// The value of "key" in one flat JSON object as tfm-train writes them (no
// nesting): the text of a string, or of a number; nullopt when absent.
std::optional<std::string_view> field(std::string_view record, std::string_view key) {
  const std::string quoted = fmt::format("\"{}\"", key);
  for (size_t at = record.find(quoted); at != std::string_view::npos; at = record.find(quoted, at + 1)) {
    size_t p = at + quoted.size();
    while (p < record.size() && record[p] == ' ') ++p;
    if (p >= record.size() || record[p] != ':') continue;  // a string value equal to the key
    ++p;
    while (p < record.size() && record[p] == ' ') ++p;
    if (p < record.size() && record[p] == '"') {
      const size_t end = record.find('"', p + 1);
      if (end == std::string_view::npos) return std::nullopt;
      return record.substr(p + 1, end - p - 1);
    }
    size_t end = p;
    while (end < record.size() && record[end] != ',' && record[end] != '}') ++end;
    return record.substr(p, end - p);
  }
  return std::nullopt;
}

std::optional<double> number(std::string_view record, std::string_view key) {
  const auto text = field(record, key);
  if (!text || text->empty() || *text == "null") return std::nullopt;
  const std::string s(*text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}

// Adds a point; a resumed run's point replaces those at or after its update.
void add(std::vector<CurvePoint>& series, int64_t step, double value) {
  while (!series.empty() && series.back().step >= step) series.pop_back();
  series.push_back({step, value});
}

// About `n` round tick values covering [lo, hi]: steps of 1, 2 or 5 x 10^k.
std::vector<double> ticks(double lo, double hi, int n) {
  const double raw = (hi - lo) / n;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double step = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
  std::vector<double> out;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    out.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);  // 0, never -0
  return out;
}

std::string label(double v) {
  if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-2)) return fmt::format("{:.0e}", v);
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

struct Panel {
  double left, top, width, height;  // the plot area, px
};

// One panel: axes, grid, ticks, the series as a line with dots. `log_y`:
// a log10 axis (ticks at 1, 2, 5 x 10^k).
std::string panel(const Panel& p, const std::vector<CurvePoint>& pts, double x_max, const std::string& name,
                  const char* colour, bool log_y, bool x_labels) {
  std::string out = fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"#888\"/>\n",
      p.left, p.top, p.width, p.height);
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-weight=\"bold\" fill=\"{}\">{}</text>\n", p.left,
                     p.top - 6, colour, xml_escape(name));
  auto x = [&](double step) { return p.left + p.width * step / x_max; };
  for (double t : ticks(0, x_max, 6)) {
    out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#eee\"/>\n",
                       x(t), p.top, p.top + p.height);
    if (x_labels)
      out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x(t),
                         p.top + p.height + 16, label(t));
  }
  if (pts.empty()) {
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#888\">no records</text>\n",
                       p.left + p.width / 2, p.top + p.height / 2);
    return out;
  }
  auto f = [&](double v) { return log_y ? std::log10(std::max(v, 1e-12)) : v; };
  double lo = f(pts[0].value), hi = lo;
  for (const CurvePoint& c : pts) lo = std::min(lo, f(c.value)), hi = std::max(hi, f(c.value));
  if (!log_y) lo = std::min(lo, 0.0);
  if (hi - lo < 1e-9) hi = lo + 1;
  const double pad = (hi - lo) * 0.05;
  lo -= log_y ? pad : 0;
  hi += pad;
  auto y = [&](double v) { return p.top + p.height * (1 - (f(v) - lo) / (hi - lo)); };
  std::vector<double> ys;
  if (log_y) {
    for (int e = static_cast<int>(std::floor(lo)); e <= static_cast<int>(std::ceil(hi)); ++e)
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10, e);
        if (std::log10(v) >= lo && std::log10(v) <= hi) ys.push_back(v);
      }
  } else {
    ys = ticks(lo, hi, 5);
  }
  for (double t : ys) {
    out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{2:.1f}\" x2=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"#eee\"/>\n",
                       p.left, p.left + p.width, y(t));
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", p.left - 6, y(t) + 4,
                       label(t));
  }
  std::string line;
  for (const CurvePoint& c : pts)
    line += fmt::format("{}{:.1f},{:.1f}", line.empty() ? "" : " ", x(static_cast<double>(c.step)), y(c.value));
  out += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", colour, line);
  for (const CurvePoint& c : pts)
    out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"><title>update {}: {}</title></circle>\n",
                       x(static_cast<double>(c.step)), y(c.value), colour, c.step, fmt::format("{:.4g}", c.value));
  const CurvePoint& last = pts.back();
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"{}\">{:.4g} at update {}</text>\n",
                     p.left + p.width - 4, p.top + 16, colour, last.value, last.step);
  return out;
}

}  // namespace

Curves read_curves(const std::string& log_path) {
  data::LineReader in(log_path);
  Curves c;
  std::string line;
  while (in.next(line)) {
    if (line.empty()) continue;
    const std::string where = fmt::format("{}:{}", in.path(), in.line_number());
    const auto event = field(line, "event");
    const auto step = number(line, "step");
    if (line.front() != '{' || !event || !step)
      throw Error("not a record of tfm-train --log (a JSON object with \"event\" and \"step\")", where);
    if (*event == "train") {
      if (const auto loss = number(line, "loss")) add(c.train_loss, static_cast<int64_t>(*step), *loss);
    } else if (*event == "valid") {
      if (const auto ppl = number(line, "ppl")) add(c.dev_ppl, static_cast<int64_t>(*step), *ppl);
    }
  }
  TFM_REQUIRE(!c.train_loss.empty() || !c.dev_ppl.empty(),
              "{} has no train or valid record to draw (tfm-train writes them every --log-every and "
              "--valid-every updates)", in.path());
  return c;
}

std::string curves_svg(const Curves& c, const std::string& title) {
  const double width = 640, height = 480;
  int64_t last = 1;
  for (const auto* s : {&c.train_loss, &c.dev_ppl})
    if (!s->empty()) last = std::max(last, s->back().step);
  const std::vector<double> xt = ticks(0, static_cast<double>(last), 6);
  const double x_max = std::max(static_cast<double>(last), xt.empty() ? 1.0 : xt.back());
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2:.1f}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">{3}</text>\n",
      width, height, width / 2, xml_escape(title));
  out += panel({60, 52, 560, 160}, c.train_loss, x_max, "training loss", "#1f77b4", false, false);
  out += panel({60, 262, 560, 160}, c.dev_ppl, x_max, "dev perplexity (log scale)", "#d62728", true, true);
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">updates</text>\n", 60 + 560 / 2.0,
                     height - 18);
  return out + "</svg>\n";
}

}  // namespace tfm::viz
