#include "libcore/eval/model_score.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "libcore/base/error.h"
#include "libcore/base/json.h"
#include "libcore/base/log.h"
#include "libcore/base/progress.h"
#include "libcore/data/line_reader.h"
#include "libcore/data/token_line.h"

namespace tfm::eval {

namespace {

std::string number(double v, int width) { return fmt::format("{:.{}f}", v, width); }

}  // namespace

Pairs read_pairs(const std::string& src_path, const std::string& tgt_path, const Vocab* vocab,
                 int64_t vocab_size) {
  data::LineReader src(src_path), tgt(tgt_path);
  Pairs p;
  std::string s, t;
  for (;;) {
    const bool has_s = src.next(s), has_t = tgt.next(t);
    if (!has_s && !has_t) break;
    if (has_s != has_t) {
      while (src.next(s)) {}
      while (tgt.next(t)) {}
      fail("{} has {} lines but {} has {}: sources and targets must pair up line by line",
           src_path, src.line_number(), tgt_path, tgt.line_number());
    }
    add_pair(p, s, t, vocab, vocab_size, [&](bool source) {
      const data::LineReader& in = source ? src : tgt;
      return fmt::format("{}:{}", in.path(), in.line_number());
    });
  }
  TFM_REQUIRE(!p.src.empty(), "{} and {} hold no sentence pairs to score", src_path, tgt_path);
  return p;
}

void add_pair(Pairs& pairs, std::string_view src, std::string_view tgt, const Vocab* vocab, int64_t vocab_size,
              const std::function<std::string(bool source)>& where) {
  const auto ids = [&](std::string_view line, bool source) {
    try {
      return parse_token_line(line, vocab, vocab_size);
    } catch (const Error& e) {
      throw Error(e.what(), where(source));
    }
  };
  pairs.src.push_back(ids(src, true));
  if (pairs.src.back().empty())
    throw Error("an empty source: the model needs at least one source token", where(true));
  pairs.tgt.push_back(ids(tgt, false));
}

ScoringPlan plan_scoring(const Pairs& pairs, int64_t max_tokens, const ModelConfig& config) {
  TFM_REQUIRE(max_tokens >= 1, "--max-tokens must be positive, not {}", max_tokens);
  const size_t n = pairs.src.size();
  // S and T of pair i; T counts the eos (start in, eos out), S the source's
  // with source_eos.
  auto S = [&](size_t i) { return static_cast<int64_t>(pairs.src[i].size()) + config.source_eos; };
  auto T = [&](size_t i) { return static_cast<int64_t>(pairs.tgt[i].size()) + 1; };
  ScoringPlan plan;
  plan.limits.max_len = 1;
  for (size_t i = 0; i < n; ++i) {
    const int64_t len = std::max(S(i), T(i));
    if (len > config.max_positions)
      throw Error(fmt::format("a pair of {} source and {} target tokens (eos included) is longer "
                              "than the model's {} positions",
                              S(i), T(i), config.max_positions),
                  fmt::format("line {}", i + 1));
    plan.limits.max_len = std::max(plan.limits.max_len, len);
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(T(a), S(a)) < std::pair(T(b), S(b));
  });
  int64_t s_max = 0, t_max = 0;
  plan.limits.max_tokens = 1;
  for (size_t i : order) {
    const int64_t s = std::max(s_max, S(i)), t = std::max(t_max, T(i));
    const auto b = plan.batches.empty() ? int64_t{0} : static_cast<int64_t>(plan.batches.back().size());
    if (b == 0 || (b + 1) * s > max_tokens || (b + 1) * t > max_tokens) {
      plan.batches.push_back({i});
      s_max = S(i), t_max = T(i);
    } else {
      plan.batches.back().push_back(i);
      s_max = s, t_max = t;
    }
    const auto rows = static_cast<int64_t>(plan.batches.back().size());
    plan.limits.max_tokens = std::max(plan.limits.max_tokens, rows * std::max(s_max, t_max));
  }
  plan.limits.loss_chunk = std::min(plan.limits.loss_chunk, plan.limits.max_tokens);
  return plan;
}

double ModelScores::perplexity() const {
  return tokens > 0 ? std::exp(-log_prob / static_cast<double>(tokens)) : 1.0;
}

ModelScores score_pairs(Transformer& model, const Pairs& pairs, const ScoringPlan& plan,
                        Progress* progress) {
  ModelScores out;
  int64_t sentences = 0, tokens = 0;
  out.sentences.resize(pairs.src.size());
  const int64_t V = model.config().vocab_size;
  const DType dtype = model.param_dtype();
  for (const std::vector<size_t>& batch : plan.batches) {
    std::vector<std::vector<int32_t>> src, tgt;
    for (size_t i : batch) {
      src.push_back(pairs.src[i]);
      tgt.push_back(pairs.tgt[i]);
    }
    const HostBatch b = HostBatch::from_pairs(src, tgt, Framing::of(model.config()));
    const Tensor lp = model.log_probs(b);  // (B * T, V), host
    const auto* data = static_cast<const std::byte*>(lp.view().data());
    for (size_t k = 0; k < batch.size(); ++k) {
      SentenceScore& s = out.sentences[batch[k]];
      for (int64_t t = 0; t < b.tgt_lengths[k]; ++t) {
        const int64_t row = static_cast<int64_t>(k) * b.tgt_len + t;
        const int64_t at = row * V + b.tgt_out[static_cast<size_t>(row)];
        double v;
        if (dtype == DType::f64) {
          std::memcpy(&v, data + at * 8, 8);
        } else {
          float f;
          std::memcpy(&f, data + at * 4, 4);
          v = f;
        }
        s.token_log_probs.push_back(v);
        s.log_prob += v;
      }
      tokens += b.tgt_lengths[k];
    }
    sentences += static_cast<int64_t>(batch.size());
    if (progress && progress->due()) {
      const double secs = progress->seconds();
      progress->report(fmt::format("{} of {} sentences ({:.0f}%) | {:.0f} tokens/s | ETA {}", sentences,
                                   pairs.src.size(), 100.0 * static_cast<double>(sentences) /
                                                         static_cast<double>(pairs.src.size()),
                                   secs > 0 ? static_cast<double>(tokens) / secs : 0.0,
                                   format_eta(eta_seconds(static_cast<double>(sentences),
                                                          static_cast<double>(pairs.src.size()), secs))),
                       true);
    }
  }
  if (progress) progress->end_live();
  // Summed in input order, so the totals do not depend on the batching.
  for (const SentenceScore& s : out.sentences) {
    out.log_prob += s.log_prob;
    out.tokens += static_cast<int64_t>(s.token_log_probs.size());
  }
  return out;
}

ModelScores score_with_model(const ModelFile& checkpoint, const ModelScoreOptions& o) {
  const ModelConfig& config = checkpoint.config();
  TFM_REQUIRE(o.ids || checkpoint.vocab(),
              "{} embeds no SentencePiece model to read pieces with: give token ids (--ids)",
              checkpoint.path());
  const Pairs pairs = read_pairs(o.src, o.tgt, o.ids ? nullptr : checkpoint.vocab(), config.vocab_size);
  return score_with_model(checkpoint, pairs, o);
}

ModelScores score_with_model(const ModelFile& checkpoint, const Pairs& pairs, const ModelScoreOptions& o) {
  const ModelConfig& config = checkpoint.config();
  TFM_REQUIRE(!pairs.src.empty(), "no sentence pairs to score");
  const ScoringPlan plan = plan_scoring(pairs, o.max_tokens, config);
  log::debug("{} pairs in {} batches, at most {} tokens a side, {} a sentence, on {}",
             pairs.src.size(), plan.batches.size(), plan.limits.max_tokens, plan.limits.max_len,
             o.device.str());
  const std::unique_ptr<Transformer> model = checkpoint.load_model(plan.limits, o.device, o.precision);
  return score_pairs(*model, pairs, plan, o.progress);
}

std::string format_model_corpus(const ModelScores& s, const FormatOptions& f) {
  if (f.score_only) return number(s.perplexity(), f.width) + "\n";
  if (f.json) {
    JsonWriter j;
    j.begin_object().field("name", "PPL").field("score", std::stod(number(s.perplexity(), f.width)))
        .field("perplexity", s.perplexity()).field("log_prob", s.log_prob)
        .field("tokens", s.tokens).field("sentences", static_cast<int64_t>(s.sentences.size()))
        .end_object();
    return j.str() + "\n";
  }
  return fmt::format("PPL = {} (log-prob = {}, tokens = {}, sentences = {})\n",
                     number(s.perplexity(), f.width), number(s.log_prob, f.width), s.tokens,
                     s.sentences.size());
}

std::string format_model_sentences(const ModelScores& s, const FormatOptions& f) {
  std::string out;
  for (size_t i = 0; i < s.sentences.size(); ++i) {
    const SentenceScore& x = s.sentences[i];
    if (f.json) {
      JsonWriter j;
      j.begin_object().field("line", static_cast<int64_t>(i + 1)).field("log_prob", x.log_prob)
          .field("tokens", static_cast<int64_t>(x.token_log_probs.size())).key("token_log_probs")
          .begin_array();
      for (double v : x.token_log_probs) j.value(v);
      out += j.end_array().end_object().str();
    } else {
      out += number(x.log_prob, f.width);
      if (!f.score_only)
        for (size_t t = 0; t < x.token_log_probs.size(); ++t) {
          out += t ? ' ' : '\t';
          out += number(x.token_log_probs[t], f.width);
        }
    }
    out += '\n';
  }
  return out;
}

}  // namespace tfm::eval
