#include "libcore/decode/constraints.h"

#include <algorithm>
#include <bit>
#include <numeric>

#include "libcore/base/error.h"
#include "libcore/decode/search_state.h"

namespace tfm {
namespace {

uint64_t bit(size_t c) { return uint64_t{1} << c; }

uint64_t all_of(const Phrases& constraints) {
  return constraints.size() == kMaxConstraints ? ~uint64_t{0} : bit(constraints.size()) - 1;
}

}  // namespace

ConstraintState advance_constraints(const Phrases& constraints, ConstraintState s, int32_t token) {
  uint64_t continued = 0;
  for (uint64_t a = s.active; a; a &= a - 1) {
    const auto c = static_cast<size_t>(std::countr_zero(a));
    if (constraints[c][static_cast<size_t>(s.matched)] == token) continued |= bit(c);
  }
  if (continued) {
    s.active = continued;
    ++s.matched;
  } else {  // those in progress abandoned; the unmet ones the token starts
    s.active = 0;
    for (size_t c = 0; c < constraints.size(); ++c)
      if (!(s.met & bit(c)) && constraints[c][0] == token) s.active |= bit(c);
    s.matched = s.active ? 1 : 0;
  }
  for (uint64_t a = s.active; a; a &= a - 1) {
    const auto c = static_cast<size_t>(std::countr_zero(a));
    if (static_cast<int32_t>(constraints[c].size()) == s.matched) {
      s.met |= bit(c);
      s.active &= ~bit(c);
    }
  }
  if (!s.active) s.matched = 0;
  return s;
}

int64_t constraint_tokens_left(const Phrases& constraints, ConstraintState s) {
  const uint64_t all = all_of(constraints);
  int64_t n = 0;
  // Each token continues the lowest constraint in progress, which stays in
  // progress until it is met: at most the constraints' tokens in all.
  while ((s.met & all) != all) {
    const int32_t token =
        s.active ? constraints[static_cast<size_t>(std::countr_zero(s.active))][static_cast<size_t>(s.matched)]
                 : constraints[static_cast<size_t>(std::countr_zero(~s.met & all))][0];
    s = advance_constraints(constraints, s, token);
    ++n;
  }
  return n;
}

int64_t forced_length(const SearchRequest& r) {
  ConstraintState s;
  if (!r.constraints.empty())
    for (int32_t y : r.prefix) s = advance_constraints(r.constraints, s, y);
  return static_cast<int64_t>(r.prefix.size()) + (r.constraints.empty() ? 0 : constraint_tokens_left(r.constraints, s));
}

namespace detail {

void advance_forced(Sentence& s, int32_t first, const StepResult& step, const BeamSearchOptions& o) {
  const int64_t t = s.t++;
  const int32_t token = s.request->prefix[static_cast<size_t>(t)];
  const Phrases& constraints = s.request->constraints;
  const Extender extended{s, step, o};
  for (size_t h = 0; h < s.live.size(); ++h) {
    const int32_t row = first + static_cast<int32_t>(h);
    const auto lp = static_cast<float>(step.full[static_cast<int64_t>(row) * step.V + token]);
    const ConstraintState state = s.live[h].constraints;
    s.live[h] = extended(s.live[h], row, token, lp);
    s.live[h].constraints = constraints.empty() ? state : advance_constraints(constraints, state, token);
  }
}

// Dynamic beam allocation (Post and Vilar 2018), as fairseq's
// LexicallyConstrainedBeamSearch: every live hypothesis proposes its top
// tokens and the next token of each constraint it could continue or
// start; a proposal is kept only if the plan that meets the remaining
// constraints still fits before max_len (so no hypothesis is ever stuck),
// and eos only once every constraint is met. A proposal's bank is its
// progress, the constraints' tokens less those the plan still needs
// (0 .. their total). Ranked by log-probability (ties: row, then token),
// the banks take turns, the most progressed first: each bank's best, then
// each bank's second, and so on, until W continue.
void advance_constrained(Sentence& s, int32_t first, const StepResult& step, const BeamSearchOptions& o,
                         EarlyStopping stopping) {
  const int64_t t = s.t++, V = step.V, k = step.k;
  const int32_t eos_id = step.eos_id;
  const SearchRequest& r = *s.request;
  const Phrases& constraints = r.constraints;
  const int64_t total = std::accumulate(constraints.begin(), constraints.end(), int64_t{0},
                                        [](int64_t n, const std::vector<int32_t>& c) { return n + static_cast<int64_t>(c.size()); });
  const int64_t room = r.max_len - t - 1;  // tokens that may follow this one
  std::vector<Proposal> proposals;
  std::vector<int64_t> banks;
  std::vector<int32_t> tokens;
  for (size_t h = 0; h < s.live.size(); ++h) {
    const int64_t row = first + static_cast<int64_t>(h);
    const Live& live = s.live[h];
    const ConstraintState state = live.constraints;
    tokens.clear();
    if (t < r.max_len) {
      for (int64_t i = 0; i < k; ++i) tokens.push_back(step.ids[static_cast<size_t>(row * k + i)]);
      for (uint64_t a = state.active; a; a &= a - 1)
        tokens.push_back(constraints[static_cast<size_t>(std::countr_zero(a))][static_cast<size_t>(state.matched)]);
      for (size_t c = 0; c < constraints.size(); ++c)
        if (!(state.met & uint64_t{1} << c)) tokens.push_back(constraints[c][0]);
      std::sort(tokens.begin(), tokens.end());
      tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
    } else {
      tokens.push_back(eos_id);
    }
    for (int32_t y : tokens) {
      ConstraintState next = state;
      int64_t left = 0;
      if (y == eos_id) {
        if (t < r.min_len || constraint_tokens_left(constraints, state) > 0) continue;
      } else {
        next = advance_constraints(constraints, state, y);
        left = constraint_tokens_left(constraints, next);
        if (left > room) continue;
      }
      const double lp = step.full[row * V + y];
      proposals.push_back({live.log_prob + lp, static_cast<float>(lp), static_cast<int32_t>(h), y, next});
      banks.push_back(total - left);
    }
  }
  std::vector<size_t> order(proposals.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Proposal &x = proposals[a], &y = proposals[b];
    if (x.log_prob != y.log_prob) return x.log_prob > y.log_prob;
    if (x.live != y.live) return x.live < y.live;
    return x.token < y.token;
  });
  // Turns: a proposal's rank within its bank, then the bank, most progress first.
  std::vector<int64_t> rank(proposals.size()), seen(static_cast<size_t>(total + 1), 0);
  for (size_t i : order) rank[i] = seen[static_cast<size_t>(banks[i])]++;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return rank[a] != rank[b] ? rank[a] < rank[b] : banks[a] > banks[b];
  });
  std::vector<Proposal> turns;
  turns.reserve(order.size());
  for (size_t i : order) turns.push_back(proposals[i]);
  const Extender extended{s, step, o};
  take_proposals(s, first, turns, extended, o.beam_size);
  TFM_REQUIRE(!s.live.empty() || !s.finished.empty(), "internal: constrained search of sentence {} left nothing",
              s.index);
  s.done = stops(s, o, stopping, false);
}

}  // namespace detail
}  // namespace tfm
