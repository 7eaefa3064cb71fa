#include "libcore/eval/bleu.h"

#include <fmt/format.h>

#include <cmath>
#include <exception>
#include <mutex>

#include "libcore/base/error.h"
#include "libcore/eval/ngram.h"
#include "libcore/eval/unicode.h"

namespace tfm::eval {

const char* smoothing_name(Smoothing s) {
  switch (s) {
    case Smoothing::none: return "none";
    case Smoothing::floor: return "floor";
    case Smoothing::add_k: return "add-k";
    case Smoothing::exp: return "exp";
  }
  return "?";
}

Smoothing parse_smoothing(std::string_view name) {
  for (Smoothing s : {Smoothing::none, Smoothing::floor, Smoothing::add_k, Smoothing::exp})
    if (name == smoothing_name(s)) return s;
  fail("unknown smoothing method '{}' (known: exp, floor, add-k, none)", name);
}

std::optional<double> default_smooth_value(Smoothing s) {
  if (s == Smoothing::floor) return 0.1;
  if (s == Smoothing::add_k) return 1.0;
  return std::nullopt;
}

BleuStats& BleuStats::operator+=(const BleuStats& o) {
  sys_len += o.sys_len;
  ref_len += o.ref_len;
  for (size_t n = 0; n < correct.size(); ++n) {
    correct[n] += o.correct[n];
    total[n] += o.total[n];
  }
  return *this;
}

std::string bleu_preprocess(std::string_view line, const BleuOptions& o) {
  if (!o.lowercase) return tokenize(rstrip(line), o.tokenize);
  const std::string lower = py_lower_utf8(line);
  return tokenize(rstrip(lower), o.tokenize);
}

namespace {

// What one thread reuses from segment to segment.
struct BleuScratch {
  std::vector<std::vector<std::string_view>> words;
  std::vector<const std::vector<std::string_view>*> lists;
  std::vector<Symbols> ids;
  WordIds interner;
  NgramTable hyp, ref;
  std::vector<int32_t> in_ref, best;
};

// _get_closest_ref_len: the closest length, the shorter one on ties.
int64_t closest_ref_len(int64_t hyp_len, std::span<const Symbols> refs) {
  int64_t best_diff = -1, best_len = -1;
  for (const Symbols& r : refs) {
    const int64_t len = static_cast<int64_t>(r.size());
    const int64_t diff = std::abs(hyp_len - len);
    if (best_diff == -1 || diff < best_diff) {
      best_diff = diff;
      best_len = len;
    } else if (diff == best_diff && len < best_len) {
      best_len = len;
    }
  }
  return best_len;
}

BleuStats segment_stats(std::string_view hyp, std::span<const std::string> refs, int max_order,
                        BleuScratch& s) {
  s.words.resize(refs.size() + 1);
  s.lists.clear();
  for (size_t k = 0; k <= refs.size(); ++k) {
    s.words[k].clear();
    split_words(k == 0 ? hyp : std::string_view(refs[k - 1]), s.words[k]);
    s.lists.push_back(&s.words[k]);
  }
  const uint32_t symbols = s.interner.assign(s.lists, s.ids);
  const Symbols& h = s.ids[0];
  const std::span<const Symbols> ref_ids(s.ids.data() + 1, refs.size());

  BleuStats st(max_order);
  st.sys_len = static_cast<int64_t>(h.size());
  st.ref_len = closest_ref_len(st.sys_len, ref_ids);
  for (int n = 1; n <= max_order; ++n) {
    s.hyp.build(h, n, symbols);
    st.total[n - 1] = s.hyp.total;
    if (s.hyp.total == 0) continue;
    // Each hypothesis n-gram is clipped to its largest count in any reference.
    s.best.assign(s.hyp.count.size(), 0);
    for (const Symbols& r : ref_ids) {
      s.ref.build(r, n, symbols);
      occurrences(h, s.hyp, r, s.ref, s.in_ref);
      for (size_t g = 0; g < s.best.size(); ++g) s.best[g] = std::max(s.best[g], s.in_ref[g]);
    }
    for (size_t g = 0; g < s.best.size(); ++g)
      st.correct[n - 1] += std::min(s.hyp.count[g], s.best[g]);
  }
  return st;
}

}  // namespace

BleuStats bleu_segment_stats(std::string_view hyp, std::span<const std::string> refs, int max_order) {
  BleuScratch scratch;
  return segment_stats(hyp, refs, max_order, scratch);
}

void for_each_segment(size_t segments, const std::function<void(size_t)>& f) {
  std::exception_ptr error;
  std::mutex mutex;
#pragma omp parallel for schedule(dynamic, 64)
  for (size_t i = 0; i < segments; ++i) {
    try {
      f(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

std::vector<BleuStats> bleu_corpus_stats(const std::vector<std::string>& hyps,
                                         const std::vector<std::vector<std::string>>& refs,
                                         const BleuOptions& o) {
  std::vector<BleuStats> stats(hyps.size(), BleuStats(o.max_order));
  for_each_segment(hyps.size(), [&](size_t i) {
    thread_local BleuScratch scratch;
    thread_local std::vector<std::string> seg_refs;
    seg_refs.resize(refs.size());
    for (size_t r = 0; r < refs.size(); ++r) seg_refs[r] = bleu_preprocess(refs[r][i], o);
    stats[i] = segment_stats(bleu_preprocess(hyps[i], o), seg_refs, o.max_order, scratch);
  });
  return stats;
}

namespace {

// sacrebleu.utils.my_log: log, floored at -9999999999 for 0.
double my_log(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }

}  // namespace

BleuScore compute_bleu(const BleuStats& stats, const BleuOptions& o) {
  const int max_order = o.max_order;
  const double smooth_value = o.smooth_value.value_or(default_smooth_value(o.smooth).value_or(0));
  BleuScore s;
  s.sys_len = stats.sys_len;
  s.ref_len = stats.ref_len;
  s.ratio = s.ref_len ? static_cast<double>(s.sys_len) / static_cast<double>(s.ref_len) : 0.0;
  s.bp = 1.0;
  if (s.sys_len < s.ref_len)
    s.bp = s.sys_len > 0 ? std::exp(1 - static_cast<double>(s.ref_len) / static_cast<double>(s.sys_len))
                         : 0.0;
  s.counts.assign(stats.correct.begin(), stats.correct.end());
  s.totals.assign(stats.total.begin(), stats.total.end());
  s.precisions.assign(max_order, 0.0);
  bool any = false;
  for (int64_t c : stats.correct) any = any || c != 0;
  if (!any) return s;  // sacreBLEU #141: no match at all is 0, whatever the smoothing

  double smooth_mteval = 1.0;
  int eff_order = max_order;
  for (int n = 1; n <= max_order; ++n) {
    double& correct = s.counts[n - 1];
    double& total = s.totals[n - 1];
    if (o.smooth == Smoothing::add_k && n > 1) {
      correct += smooth_value;
      total += smooth_value;
    }
    if (total == 0) break;
    if (o.effective_order) eff_order = n;
    if (correct == 0) {
      if (o.smooth == Smoothing::exp) {
        smooth_mteval *= 2;
        s.precisions[n - 1] = 100. / (smooth_mteval * total);
      } else if (o.smooth == Smoothing::floor) {
        s.precisions[n - 1] = 100. * smooth_value / total;
      }
    } else {
      s.precisions[n - 1] = 100. * correct / total;
    }
  }
  double log_sum = 0;  // Python's sum(): left to right from 0
  for (int n = 0; n < eff_order; ++n) log_sum += my_log(s.precisions[n]);
  s.score = s.bp * std::exp(log_sum / eff_order);
  return s;
}

std::string bleu_details(const BleuScore& s) {
  std::string out;
  for (size_t n = 0; n < s.precisions.size(); ++n)
    out += fmt::format("{}{:.1f}", n ? "/" : "", s.precisions[n]);
  return out + fmt::format(" (BP = {:.3f} ratio = {:.3f} hyp_len = {} ref_len = {})", s.bp, s.ratio,
                           s.sys_len, s.ref_len);
}

std::string bleu_signature(const BleuOptions& o, int nrefs, std::string_view version) {
  std::string smooth = smoothing_name(o.smooth);
  if (const auto def = default_smooth_value(o.smooth))
    smooth += fmt::format("[{:.2f}]", o.smooth_value.value_or(*def));
  return fmt::format("nrefs:{}|case:{}|eff:{}|tok:{}|smooth:{}|version:{}", nrefs,
                     o.lowercase ? "lc" : "mixed", o.effective_order ? "yes" : "no",
                     tokenizer_name(o.tokenize), smooth, version);
}

}  // namespace tfm::eval
