// Target prefixes and hard lexical constraints (SearchRequest::prefix,
// SearchRequest::constraints; search.h has the search that uses them).
//
// A prefix's tokens are forced: at position t < |prefix| every live
// hypothesis takes prefix[t], scored by the model's log-probability of it,
// and the beam holds the one hypothesis until the prefix ends.
//
// Constraints are token phrases every finished hypothesis contains. A
// hypothesis tracks its progress through them (ConstraintState): the
// constraints met, and those whose first `matched` tokens end its output
// (started while unmet). A token that continues some of them continues
// those; one that continues none abandons them, and starts the unmet
// constraints it begins, if any. Where one constraint is a prefix of
// another ("a b", "a b c"), "a b c" meets both. Overlaps across a
// constraint's end ("a b" then "b c" as "a b c") are not seen: the search
// writes "b c" again. So a hypothesis counted as meeting a constraint
// always contains it; the converse may not hold.
//
// constraint_tokens_left is the number of tokens of the plan that meets
// every constraint from a state: continue the lowest-numbered constraint
// in progress, or else start the lowest-numbered unmet one. The search
// (Post and Vilar 2018's dynamic beam allocation, constraints.cc) keeps
// only hypotheses that can still carry out that plan before max_len, lets
// eos end only those that met every constraint, and divides the beam into
// banks by progress (the tokens the plan no longer needs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tfm {

struct SearchRequest;

using Phrases = std::vector<std::vector<int32_t>>;

// At most this many constraints a sentence (a bit each).
inline constexpr size_t kMaxConstraints = 64;

struct ConstraintState {
  uint64_t met = 0;     // bit c: constraint c is in the output
  uint64_t active = 0;  // bit c: its first `matched` tokens end the output
  int32_t matched = 0;  // 0 when none is active
};

// The state after one more token.
ConstraintState advance_constraints(const Phrases& constraints, ConstraintState s, int32_t token);

// Tokens the plan above needs to meet every constraint from `s` (0: all met).
int64_t constraint_tokens_left(const Phrases& constraints, ConstraintState s);

// The fewest tokens before eos an output of request r can have: its
// prefix, then what its constraints still need after it.
int64_t forced_length(const SearchRequest& r);

}  // namespace tfm
