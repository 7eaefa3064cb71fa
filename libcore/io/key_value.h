// The "key = value" text of tfm's configuration files, checkpoint
// configurations and training states: one pair per line, '#' starts a
// comment, blank lines and INI section headers ("[model]") are skipped.
// Reading is strict: a malformed line, a key given twice, or an Error thrown
// for a pair, is one Error whose where() is SOURCE:LINE.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace tfm::io {

std::string_view trim(std::string_view s);

// Calls `set(key, value)` for every pair of `text`, in order.
void for_each_key_value(std::string_view text, std::string_view source,
                        const std::function<void(std::string_view, std::string_view)>& set);

// Values, checked: `what` names the value in the message ("config: layers
// must be an integer, got 'x'").
int64_t parse_int(std::string_view what, std::string_view v, int64_t lo, int64_t hi);
uint64_t parse_uint(std::string_view what, std::string_view v);
// Finite numbers only; the text round-trips exactly (from_chars).
double parse_double(std::string_view what, std::string_view v, double lo, double hi);
bool parse_bool(std::string_view what, std::string_view v);  // true/false, 1/0, yes/no

}  // namespace tfm::io
