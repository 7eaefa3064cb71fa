#include "libcore/decode/search.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>
#include <numeric>
#include <utility>

#include "libcore/base/error.h"
#include "libcore/base/rng.h"
#include "libcore/decode/search_state.h"
#include "libcore/model/batch.h"

namespace tfm {
namespace detail {

SearchQueue::SearchQueue(size_t requests, size_t decoders, size_t holds)
    : requests_(requests), holds_(holds), allowed_(std::max<size_t>(decoders, 1)) {}

std::optional<size_t> SearchQueue::take(size_t decoder, int64_t held) {
  if (empty()) return std::nullopt;
  const size_t left = requests_ - next_;
  const size_t share = (left + allowed_.size() - 1) / allowed_.size();
  if (!tail_ && held == 0 && left < allowed_.size() * holds_) {
    tail_ = true;
    std::fill(allowed_.begin(), allowed_.end(), share);
  }
  if (tail_) {
    size_t& allowed = allowed_.at(decoder);
    if (held == 0 && allowed == 0) allowed = share;
    if (allowed == 0) return std::nullopt;
    --allowed;
  }
  return next_++;
}

bool ranks_before(const Hypothesis& a, const Hypothesis& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.log_prob != b.log_prob) return a.log_prob > b.log_prob;
  if (a.tokens.size() != b.tokens.size()) return a.tokens.size() < b.tokens.size();
  return a.tokens < b.tokens;
}

namespace {

// The attention row of decoder row r for a source of `len` tokens: its
// heads' mean, or every head, out of weights (N, H, S).
void append_attention(const Tensor& weights, int64_t r, int64_t len, bool heads,
                      std::vector<float>& out) {
  const int64_t H = weights.shape()[1], S = weights.shape()[2];
  const bool f64 = weights.dtype() == DType::f64;
  auto at = [&](int64_t h, int64_t j) {
    const int64_t i = (r * H + h) * S + j;
    return f64 ? weights.data_as<double>()[i] : static_cast<double>(weights.data_as<float>()[i]);
  };
  if (heads) {
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < len; ++j) out.push_back(static_cast<float>(at(h, j)));
    return;
  }
  for (int64_t j = 0; j < len; ++j) {
    double sum = 0;
    for (int64_t h = 0; h < H; ++h) sum += at(h, j);
    out.push_back(static_cast<float>(sum / static_cast<double>(H)));
  }
}

}  // namespace

Hypothesis ended(const Sentence& s, const Live& n, const BeamSearchOptions& o) {
  const size_t row = s.nodes.empty() ? 0 : s.attention.size() / s.nodes.size();  // an attention row's floats
  size_t count = 0;
  for (int32_t i = n.node; i >= 0; i = s.nodes[static_cast<size_t>(i)].parent) ++count;
  TFM_REQUIRE(count >= 1, "internal: a hypothesis ended without a token");
  Hypothesis y;
  y.tokens.resize(count - 1);  // the last node is eos
  y.token_log_probs.resize(count);
  y.attention.resize(count * row);
  size_t j = count;
  for (int32_t i = n.node; i >= 0; i = s.nodes[static_cast<size_t>(i)].parent) {
    const Node& node = s.nodes[static_cast<size_t>(i)];
    --j;
    y.token_log_probs[j] = node.log_prob;
    if (j < y.tokens.size()) y.tokens[j] = node.token;
    std::copy_n(s.attention.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(i) * row), row,
                y.attention.begin() + static_cast<std::ptrdiff_t>(j * row));
  }
  y.log_prob = n.log_prob;
  y.score = n.log_prob / length_penalty(static_cast<int64_t>(count), o.alpha, o.length_penalty);
  return y;
}

Live Extender::operator()(const Live& h, int32_t row, int32_t token, float lp) const {
  Live n;
  n.log_prob = h.log_prob + lp;
  n.node = static_cast<int32_t>(s.nodes.size());
  s.nodes.push_back({h.node, token, lp});
  if (o.attention_layer >= 0)
    append_attention(step.weights, row, static_cast<int64_t>(s.request->source.size()), o.attention_heads,
                     s.attention);
  n.row = row;
  n.sample = h.sample;
  return n;
}

void Extender::finish(const Live& n) const { s.finished.push_back(ended(s, n, o)); }

bool stops(Sentence& s, const BeamSearchOptions& o, EarlyStopping stopping, bool sorted) {
  if (s.live.empty()) return true;
  if (stopping == EarlyStopping::beam) return static_cast<int64_t>(s.finished.size()) >= o.beam_size;
  if (stopping != EarlyStopping::bound || static_cast<int64_t>(s.finished.size()) < o.n_best) return false;
  std::partial_sort(s.finished.begin(), s.finished.begin() + o.n_best, s.finished.end(), ranks_before);
  double best_live = s.live.front().log_prob;
  for (size_t h = 1; !sorted && h < s.live.size(); ++h) best_live = std::max(best_live, s.live[h].log_prob);
  const double bound = best_live / length_penalty(s.request->max_len + 1, o.alpha, o.length_penalty);
  return s.finished[static_cast<size_t>(o.n_best - 1)].score >= bound;
}

void take_proposals(Sentence& s, int32_t first, const std::vector<Proposal>& proposals, const Extender& extended,
                    int64_t W) {
  const int32_t eos_id = extended.step.eos_id;
  std::vector<Live>& next = s.spare;
  next.clear();
  for (const Proposal& p : proposals) {
    Live n = extended(s.live[static_cast<size_t>(p.live)], first + p.live, p.token, p.token_log_prob);
    n.constraints = p.state;
    if (p.token == eos_id) {
      extended.finish(n);
      continue;
    }
    next.push_back(n);
    if (static_cast<int64_t>(next.size()) == W) break;
  }
  std::swap(s.live, next);
}

}  // namespace detail

using detail::append_attention;
using detail::Extender;
using detail::Live;
using detail::Sentence;
using detail::StepResult;
using detail::Proposal;
using detail::ranks_before;
using detail::stops;
using detail::take_proposals;

double length_penalty(int64_t length, double alpha, LengthPenalty form) {
  const double n = static_cast<double>(length);
  return form == LengthPenalty::gnmt ? std::pow((5.0 + n) / 6.0, alpha) : std::pow(n, alpha);
}

LengthPenalty parse_length_penalty(std::string_view name) {
  if (name == "gnmt") return LengthPenalty::gnmt;
  if (name == "plain") return LengthPenalty::plain;
  throw Error(fmt::format("length penalty must be gnmt or plain, got '{}'", printable(name)));
}

EarlyStopping parse_early_stopping(std::string_view name) {
  if (name == "bound") return EarlyStopping::bound;
  if (name == "beam") return EarlyStopping::beam;
  if (name == "never") return EarlyStopping::never;
  throw Error(fmt::format("early stopping must be bound, beam or never, got '{}'", printable(name)));
}

int64_t search_rows(int64_t sentences, const BeamSearchOptions& o) { return sentences * o.beam_size; }

int32_t sample_token(const double* log_probs, int64_t V, const SamplingOptions& o, double u, int32_t barred,
                     std::vector<int32_t>& order) {
  order.clear();
  for (int32_t v = 0; v < static_cast<int32_t>(V); ++v)
    if (v != barred) order.push_back(v);
  TFM_REQUIRE(!order.empty(), "sampling: no token may be drawn");
  const auto before = [&](int32_t a, int32_t b) {
    return log_probs[a] != log_probs[b] ? log_probs[a] > log_probs[b] : a < b;
  };
  size_t n = order.size();
  if (o.top_k > 0 && static_cast<size_t>(o.top_k) < n) {
    n = static_cast<size_t>(o.top_k);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(), before);
    order.resize(n);
  } else if (o.top_p < 1) {
    std::sort(order.begin(), order.end(), before);
  }
  // Tempered weights relative to the most likely kept token (no overflow).
  double top = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < n; ++i) top = std::max(top, log_probs[order[i]]);
  const auto weight = [&](int32_t v) { return std::exp((log_probs[v] - top) / o.temperature); };
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += weight(order[i]);
  if (o.top_p < 1) {  // the fewest, down the ranking, whose share reaches top_p
    double kept = 0;
    size_t m = 0;
    while (m < n && kept < o.top_p * total) kept += weight(order[m++]);
    n = std::max<size_t>(m, 1);
    total = kept > 0 ? kept : weight(order[0]);
  }
  const double target = u * total;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    sum += weight(order[i]);
    if (target < sum) return order[i];
  }
  return order[n - 1];  // rounding: u * total at the very top
}

double sample_uniform(uint64_t seed, uint64_t key, int64_t sample, int64_t t) {
  // Counter: (sample, key's high half) as the block, key's low half as the
  // tensor, the position as the step.
  const RngKey k{seed, static_cast<uint32_t>(key), static_cast<uint32_t>(t)};
  const Philox4 r = philox_block(k, (key >> 32) << 32 | static_cast<uint32_t>(sample));
  return static_cast<double>((uint64_t{r.v[0]} >> 5) << 26 | (r.v[1] >> 6)) / 9007199254740992.0;  // / 2^53
}

int64_t search_steps(const std::vector<SearchRequest>& batch) {
  int64_t steps = 1;
  for (const SearchRequest& r : batch) steps = std::max(steps, r.max_len + 1);
  return steps;
}

namespace {

// Request i's lengths, prefix and constraints.
void check_request(const SearchRequest& r, size_t i, const BeamSearchOptions& o, int64_t V, int64_t eos_id) {
  TFM_REQUIRE(r.max_len >= 0 && r.min_len <= r.max_len, "beam search: sentence {} has lengths [{}, {}]", i,
              r.min_len, r.max_len);
  if (r.prefix.empty() && r.constraints.empty()) return;
  TFM_REQUIRE(!o.sampling.on || r.constraints.empty(), "sampling: sentence {} has constraints", i);
  TFM_REQUIRE(r.constraints.size() <= kMaxConstraints, "sentence {} has {} constraints, more than {}", i,
              r.constraints.size(), kMaxConstraints);
  const auto check = [&](const std::vector<int32_t>& tokens, std::string_view what) {
    for (int32_t y : tokens)
      TFM_REQUIRE(y >= 0 && y < V && y != eos_id, "sentence {}: its {} holds token {}: eos, or outside [0, {})",
                  i, what, y, V);
  };
  check(r.prefix, "prefix");
  for (const std::vector<int32_t>& c : r.constraints) {
    TFM_REQUIRE(!c.empty(), "sentence {} has an empty constraint", i);
    check(c, "constraint");
  }
  TFM_REQUIRE(forced_length(r) <= r.max_len, "sentence {}: its prefix and constraints need {} tokens, over its {}",
              i, forced_length(r), r.max_len);
}

// The options against the decoder's plan; the number of tokens a row
// proposes each step (2W, so that W survive when up to W of them end).
int64_t check_search(const IncrementalDecoder& decoder, const std::vector<SearchRequest>& batch,
                     const BeamSearchOptions& o) {
  const int64_t W = o.beam_size;
  TFM_REQUIRE(W >= 1 && o.n_best >= 1 && o.n_best <= W,
              "beam search: beam size {} and n-best {} must be positive, n-best at most the beam",
              W, o.n_best);
  TFM_REQUIRE(o.alpha >= 0 && std::isfinite(o.alpha), "beam search: alpha {} must be >= 0", o.alpha);
  TFM_REQUIRE(o.attention_layer == decoder.limits().attention_layer || o.attention_layer < 0,
              "beam search: the decoder keeps the attention of layer {}, not {}",
              decoder.limits().attention_layer, o.attention_layer);
  const int64_t V = decoder.vocab_size();
  TFM_REQUIRE(V > decoder.config().eos_id, "beam search: a vocabulary of {} has no eos (id {})", V,
              decoder.config().eos_id);
  if (o.sampling.on) {
    const SamplingOptions& p = o.sampling;
    TFM_REQUIRE(o.n_best == W, "sampling: the samples a sentence ({}) are its rows: the beam size ({}) must equal them",
                o.n_best, W);
    TFM_REQUIRE(p.top_k >= 0 && p.top_p > 0 && p.top_p <= 1 && p.temperature > 0 && std::isfinite(p.temperature),
                "sampling: top-k {} must be >= 0, top-p {} in (0, 1] and the temperature {} > 0", p.top_k, p.top_p,
                p.temperature);
    return 0;
  }
  const int64_t k = std::min<int64_t>(2 * W, V);
  TFM_REQUIRE(decoder.limits().top_k >= k, "beam search: the decoder plans the top {} tokens, a beam of {} needs {}",
              decoder.limits().top_k, W, k);
  for (size_t s = 0; s < batch.size(); ++s) check_request(batch[s], s, o, V, decoder.config().eos_id);
  return k;
}

// An ensemble: one decoder a model, planned alike, one weight each.
void check_team(const Team& t) {
  TFM_REQUIRE(!t.members.empty() && t.weights.size() == t.members.size(),
              "internal: an ensemble of {} decoders with {} weights", t.members.size(), t.weights.size());
  const IncrementalDecoder& first = *t.members.front();
  for (const IncrementalDecoder* d : t.members) {
    const DecoderLimits &a = d->limits(), &b = first.limits();
    TFM_REQUIRE(d->vocab_size() == first.vocab_size() && a.sentences == b.sentences && a.rows == b.rows &&
                    a.steps == b.steps && a.src_len == b.src_len && a.src_tokens == b.src_tokens &&
                    a.cache_rows == b.cache_rows && a.top_k == b.top_k,
                "internal: an ensemble's decoders are planned differently");
  }
  for (double w : t.weights) TFM_REQUIRE(w >= 0 && std::isfinite(w), "an ensemble weight must be >= 0, got {}", w);
}

// One step of sentence s, whose live hypotheses were fed by rows first,
// first + 1, ...: each proposes its top tokens, the best W proposals live
// on (those that end are finished), and the sentence is done once early
// stopping says so.
void advance(Sentence& s, int32_t first, const StepResult& step, const BeamSearchOptions& o,
             EarlyStopping stopping, std::vector<Proposal>& proposals) {
  const int64_t W = o.beam_size, k = step.k, t = s.t++;
  const int32_t eos_id = step.eos_id;
  const Extender extended{s, step, o};
  if (t >= s.request->max_len) {  // only eos may follow
    for (size_t h = 0; h < s.live.size(); ++h) {
      const int32_t row = first + static_cast<int32_t>(h);
      const auto lp = static_cast<float>(step.eos[static_cast<size_t>(row)]);
      extended.finish(extended(s.live[h], row, eos_id, lp));
    }
    s.live.clear();
    s.done = true;
    return;
  }
  proposals.clear();
  for (size_t h = 0; h < s.live.size(); ++h) {
    const int64_t row = first + static_cast<int64_t>(h);
    for (int64_t i = 0; i < k; ++i) {
      const int32_t token = step.ids[static_cast<size_t>(row * k + i)];
      if (token == eos_id && t < s.request->min_len) continue;
      const double lp = step.log_probs[static_cast<size_t>(row * k + i)];
      proposals.push_back({s.live[h].log_prob + lp, static_cast<float>(lp), static_cast<int32_t>(h), token});
    }
  }
  std::stable_sort(proposals.begin(), proposals.end(), [](const Proposal& a, const Proposal& b) {
    if (a.log_prob != b.log_prob) return a.log_prob > b.log_prob;
    if (a.live != b.live) return a.live < b.live;
    return a.token < b.token;
  });
  take_proposals(s, first, proposals, extended, W);
  s.done = stops(s, o, stopping, true);  // live is in ranking order
}

// One step of sentence s under sampling: each live sample, fed by rows
// first, first + 1, ..., draws its next token from `lp` (the step's (N, V)
// log-probabilities); eos ends it, and at max_len eos is forced.
void advance_sampling(Sentence& s, int32_t first, const double* lp, int64_t V, int32_t eos_id,
                      const BeamSearchOptions& o, const Tensor& weights, std::vector<int32_t>& scratch) {
  const int64_t t = s.t++;
  const int64_t src_len = static_cast<int64_t>(s.request->source.size());
  std::vector<Live>& next = s.spare;
  next.clear();
  for (size_t h = 0; h < s.live.size(); ++h) {
    Live& n = s.live[h];
    const int32_t row = first + static_cast<int32_t>(h);
    const double* p = lp + static_cast<int64_t>(row) * V;
    const int32_t token =
        t >= s.request->max_len
            ? eos_id
            : sample_token(p, V, o.sampling, sample_uniform(o.sampling.seed, s.request->key, n.sample, t),
                           t < s.request->min_len ? eos_id : -1, scratch);
    n.log_prob += p[token];
    s.nodes.push_back({n.node, token, static_cast<float>(p[token])});
    n.node = static_cast<int32_t>(s.nodes.size() - 1);
    if (o.attention_layer >= 0) append_attention(weights, row, src_len, o.attention_heads, s.attention);
    n.row = row;
    if (token != eos_id) {
      next.push_back(n);
      continue;
    }
    s.finished.push_back(detail::ended(s, n, o));
    s.finished_samples.push_back(n.sample);
  }
  std::swap(s.live, next);
  s.done = s.live.empty();
}

// A sentence's finished hypotheses, best first, at most n_best.
std::vector<Hypothesis> collect(Sentence& s, int64_t n_best) {
  if (!s.finished_samples.empty()) {  // sampling: in the order drawn
    std::vector<Hypothesis> out(s.finished.size());
    for (size_t i = 0; i < s.finished.size(); ++i)
      out[static_cast<size_t>(s.finished_samples[i])] = std::move(s.finished[i]);
    return out;
  }
  std::sort(s.finished.begin(), s.finished.end(), ranks_before);
  if (static_cast<int64_t>(s.finished.size()) > n_best) s.finished.resize(static_cast<size_t>(n_best));
  return std::move(s.finished);
}

}  // namespace

namespace {

// Sentences of `requests`, taken by `take` in turn, searched on one decoder
// with continuous batching: before each step the decoder admits (encodes)
// as many of the next ones as it has room for, with room for all their
// beams (sentence slots, rows, source rows, and W (max_len + 1) pool rows
// each), and a sentence that stops is reported and released at once, so
// that steps stay full. take(fits, held) gives the next request's index if
// fits(request) holds for it (under the caller's lock), else none; held is
// how many sentences the decoder has (live and joining).
//
// An ensemble's members (team, beside the first) are admitted, stepped and
// released alike; after each step the first's logits become their weighted
// mean (mix_logits), and everything else is read from the first.
void stream(const Team& team, const BeamSearchOptions& o,
            const std::function<const SearchRequest*(const std::function<bool(const SearchRequest&)>&, int64_t,
                                                     size_t&)>& take,
            const std::function<void(size_t, std::vector<Hypothesis>&&)>& done) {
  IncrementalDecoder& decoder = *team.members.front();
  const std::vector<IncrementalDecoder*> others(team.members.begin() + 1, team.members.end());
  const DecoderLimits& l = decoder.limits();
  const int64_t W = o.beam_size;
  const EarlyStopping stopping = W == 1 ? EarlyStopping::beam : o.early_stopping;
  const int64_t k = check_search(decoder, {}, o);
  // The model's framing (config.h): the decoder's first input, and the end.
  const auto start_id = static_cast<int32_t>(decoder.config().decoder_start_id);
  const auto eos_id = static_cast<int32_t>(decoder.config().eos_id);
  const int64_t refill_at = std::max<int64_t>(1, l.sentences / 8);
  for (IncrementalDecoder* d : team.members) d->reset();
  std::vector<Sentence> live;
  int64_t reserved = 0;  // pool rows the live sentences may still take, at most
  std::vector<IncrementalDecoder::Row> rows;
  std::vector<double> log_probs, eos;
  std::vector<int32_t> ids;
  std::vector<Proposal> proposals;
  std::vector<double> all_log_probs;  // (N, V), where a step needs them (StepResult::full)
  std::vector<int32_t> scratch;  // sampling: sample_token's
  Tensor weights;
  for (;;) {
    // Admissions: the next requests while all of their beams fit.
    std::vector<std::vector<int32_t>> sources;
    std::vector<Sentence> joining;
    int64_t longest = 0;
    // Refills wait for an eighth of the slots to be free, so that the
    // encoder runs on several sentences at once (on a GPU each admission
    // is its own launches and uploads), not on each as it comes.
    const bool admitting = live.empty() || (o.refill && static_cast<int64_t>(live.size()) <= l.sentences - refill_at);
    while (admitting) {
      const auto fits = [&](const SearchRequest& r) {
        const int64_t n = static_cast<int64_t>(live.size() + joining.size()) + 1;
        const int64_t S = std::max<int64_t>(longest, static_cast<int64_t>(r.source.size()));
        return n <= l.sentences && n * W <= l.rows && reserved + W * (r.max_len + 1) <= l.cache_rows &&
               static_cast<int64_t>(joining.size() + 1) * S <= std::min(l.src_tokens, decoder.free_source_rows()) &&
               r.max_len + 1 <= l.steps && static_cast<int64_t>(r.source.size()) <= l.src_len;
      };
      size_t index = 0;
      const SearchRequest* r = take(fits, static_cast<int64_t>(live.size() + joining.size()), index);
      if (!r) break;
      check_request(*r, index, o, decoder.vocab_size(), eos_id);
      reserved += W * (r->max_len + 1);
      longest = std::max<int64_t>(longest, static_cast<int64_t>(r->source.size()));
      Sentence s;
      s.request = r;
      s.index = index;
      s.live.emplace_back();
      for (int32_t j = 1; o.sampling.on && j < W; ++j) s.live.emplace_back().sample = j;  // every sample a row
      joining.push_back(std::move(s));
      sources.push_back(r->source);
    }
    if (!joining.empty()) {
      const std::vector<int32_t> slots = decoder.admit(sources);
      for (IncrementalDecoder* d : others)
        TFM_REQUIRE(d->admit(sources) == slots, "internal: an ensemble's members gave the sentences other slots");
      for (size_t j = 0; j < joining.size(); ++j) {
        joining[j].slot = slots[j];
        live.push_back(std::move(joining[j]));
      }
    }
    if (live.empty()) {
      // Nothing to decode and nothing taken: the queue is empty, or its next
      // request does not fit even an empty decoder.
      size_t index = 0;
      const SearchRequest* r = take([](const SearchRequest&) { return true; }, 0, index);
      if (!r) return;
      TFM_REQUIRE(false, "beam search: a sentence of {} tokens allowing {} output tokens does not fit the decoder's "
                  "plan ({} source tokens, {} positions, {} cache rows)",
                  r->source.size(), r->max_len, std::min(l.src_tokens, l.src_len), l.steps, l.cache_rows);
    }
    // Each live hypothesis feeds one row: its last token, continuing the
    // row that proposed it.
    rows.clear();
    for (const Sentence& s : live)
      for (const Live& h : s.live) rows.push_back({s.slot, h.row, h.node < 0 ? start_id : s.nodes[static_cast<size_t>(h.node)].token});
    for (IncrementalDecoder* d : team.members) d->step(rows);
    if (!others.empty()) decoder.mix_logits(others, team.weights);
    // Every row's log-probabilities: sampling draws from them, and a
    // prefix's or a constraint's tokens are scored by them.
    bool full = o.sampling.on;
    for (const Sentence& s : live)
      full |= s.t < static_cast<int64_t>(s.request->prefix.size()) || !s.request->constraints.empty();
    if (full) {
      const Tensor lp = decoder.log_probs();  // (N, V) on the host
      all_log_probs.resize(static_cast<size_t>(lp.numel()));
      if (lp.dtype() == DType::f64) {
        std::copy_n(lp.data_as<double>(), lp.numel(), all_log_probs.begin());
      } else {
        TFM_REQUIRE(lp.dtype() == DType::f32, "search: log-probabilities in {}", dtype_name(lp.dtype()));
        std::copy_n(lp.data_as<float>(), lp.numel(), all_log_probs.begin());
      }
    }
    if (!o.sampling.on) {
      decoder.top_k(k, log_probs, ids);
      bool at_max = false;
      for (const Sentence& s : live) at_max |= s.t >= s.request->max_len;
      if (at_max) eos = decoder.log_prob_of(eos_id);
    }
    if (o.attention_layer >= 0) weights = decoder.attention();
    const StepResult step{k, eos_id, log_probs, ids, eos, weights,
                          full ? all_log_probs.data() : nullptr, decoder.vocab_size()};
    int32_t first = 0;  // the first row of the sentence at hand
    for (Sentence& s : live) {
      const int32_t n = static_cast<int32_t>(s.live.size());
      if (s.t < static_cast<int64_t>(s.request->prefix.size()))
        detail::advance_forced(s, first, step, o);
      else if (o.sampling.on)
        advance_sampling(s, first, step.full, step.V, eos_id, o, weights, scratch);
      else if (!s.request->constraints.empty())
        detail::advance_constrained(s, first, step, o, stopping);
      else
        advance(s, first, step, o, stopping, proposals);
      first += n;
    }
    // Those that stopped: reported, and their room given back.
    size_t kept = 0;
    for (Sentence& s : live) {
      if (!s.done) {
        if (&live[kept] != &s) live[kept] = std::move(s);
        ++kept;
        continue;
      }
      reserved -= W * (s.request->max_len + 1);
      for (IncrementalDecoder* d : team.members) d->release(s.slot);
      done(s.index, collect(s, o.n_best));
    }
    live.resize(kept);
  }
}

}  // namespace

std::vector<std::vector<Hypothesis>> beam_search(IncrementalDecoder& decoder,
                                                 const std::vector<SearchRequest>& batch,
                                                 const BeamSearchOptions& o) {
  return beam_search(Team{{&decoder}, {1.0}}, batch, o);
}

std::vector<std::vector<Hypothesis>> beam_search(const Team& team, const std::vector<SearchRequest>& batch,
                                                 const BeamSearchOptions& o) {
  check_team(team);
  check_search(*team.members.front(), batch, o);
  std::vector<std::vector<Hypothesis>> out(batch.size());
  size_t next = 0;
  stream(
      team, o,
      [&](const std::function<bool(const SearchRequest&)>& fits, int64_t, size_t& index) -> const SearchRequest* {
        if (next == batch.size() || !fits(batch[next])) return nullptr;
        index = next;
        return &batch[next++];
      },
      [&](size_t i, std::vector<Hypothesis>&& nbest) { out[i] = std::move(nbest); });
  return out;
}

ThreadWork parse_thread_work(std::string_view name) {
  for (ThreadWork w : {ThreadWork::automatic, ThreadWork::batches, ThreadWork::rows})
    if (name == thread_work_name(w)) return w;
  fail("unknown thread work '{}' (known: auto, batches, rows)", name);
}

std::string_view thread_work_name(ThreadWork work) {
  switch (work) {
    case ThreadWork::automatic: return "auto";
    case ThreadWork::batches: return "batches";
    case ThreadWork::rows: return "rows";
  }
  return "?";
}

int search_threads(const ModelWeights& model, int threads, ThreadWork work) {
  if (!model.device().is_cpu() || work == ThreadWork::rows) return 1;
  return std::max(threads, 1);
}

size_t search_teams(const ModelWeights& model, ThreadWork work, size_t teams, size_t requests, int64_t batch) {
  if (work != ThreadWork::automatic || teams <= 1 || cpu_threads_take_rows(model)) return teams;
  // A large model's decoders each stream every weight a step, and beat one
  // decoder with its rows split (CTranslate2's inter_threads against its
  // intra_threads) only while each has whole batches: with fewer, the
  // threads would idle beside the last ones.
  return requests >= teams * static_cast<size_t>(std::max<int64_t>(batch, 1)) ? teams : 1;
}

void search_stream(const std::vector<std::unique_ptr<IncrementalDecoder>>& decoders,
                   const std::vector<SearchRequest>& requests, const BeamSearchOptions& o,
                   const std::function<void(size_t, std::vector<Hypothesis>&&)>& done) {
  std::vector<Team> teams;
  for (const auto& d : decoders) teams.push_back({{d.get()}, {1.0}});
  search_stream(teams, requests, o, done);
}

void search_stream(const std::vector<Team>& teams, const std::vector<SearchRequest>& requests,
                   const BeamSearchOptions& o, const std::function<void(size_t, std::vector<Hypothesis>&&)>& done) {
  TFM_REQUIRE(!teams.empty(), "internal: search_stream without a decoder");
  for (const Team& t : teams) check_team(t);
  const int threads = static_cast<int>(std::min(teams.size(), requests.size()));
  // The queue: requests in order, each taken by the first decoder with room
  // (its tail shared out: SearchQueue).
  std::mutex queue_mutex, done_mutex;
  const DecoderLimits& l = teams[0].members.front()->limits();
  detail::SearchQueue queue(requests.size(), static_cast<size_t>(std::max(threads, 1)),
                            static_cast<size_t>(std::min(l.sentences, l.rows / std::max<int64_t>(o.beam_size, 1))));
  std::atomic<bool> stop{false};
  const auto take_for = [&](size_t team) {
    return [&, team](const std::function<bool(const SearchRequest&)>& fits, int64_t held,
                     size_t& index) -> const SearchRequest* {
      const std::lock_guard<std::mutex> lock(queue_mutex);
      if (stop || queue.empty() || !fits(requests[queue.next()])) return nullptr;
      const std::optional<size_t> taken = queue.take(team, held);
      if (!taken) return nullptr;
      index = *taken;
      return &requests[index];
    };
  };
  const auto report = [&](size_t i, std::vector<Hypothesis>&& nbest) {
    const std::lock_guard<std::mutex> lock(done_mutex);
    if (stop) return;
    try {
      done(i, std::move(nbest));
    } catch (...) {
      stop = true;  // before another thread can report
      throw;
    }
  };
  if (threads <= 1) {
    stream(teams[0], o, take_for(0), report);
    return;
  }
  std::vector<std::exception_ptr> failed(static_cast<size_t>(threads));
#pragma omp parallel num_threads(threads)
  {
    const auto t = static_cast<size_t>(omp_get_thread_num());
    const Team& team = teams[t];
    // Regions nested in this one run on one thread already, but the decoder
    // and the GEMMs size their splits by omp_get_max_threads(): one here.
    // (An implicit task's own setting; the caller's is untouched.)
    omp_set_num_threads(1);
    try {
      stream(team, o, take_for(t), report);
    } catch (...) {
      failed[t] = std::current_exception();
      stop = true;
    }
  }
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
}

}  // namespace tfm
