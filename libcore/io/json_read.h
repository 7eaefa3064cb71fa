// Reading JSON (RFC 8259) into an io::Value: Hugging Face's config.json and
// vocab.json, safetensors headers. (base/json.h is the writer.)
//
// Strict: one value and nothing after it but whitespace; no comments,
// trailing commas, NaN, leading zeros or control characters in strings; a
// key given twice in one object is an error. Strings are UTF-8 (checked),
// \u escapes included, surrogate pairs joined, a lone surrogate refused. A
// number without a fraction or exponent that fits int64 is an integer,
// every other number a float (one that overflows a double is an error).
// Objects become dicts in file order, arrays lists. Nesting deeper than 512
// levels is refused. An error is one Error whose where() is ORIGIN:LINE:COLUMN.
#pragma once

#include <string>
#include <string_view>

#include "libcore/io/value.h"

namespace tfm::io {

// `origin` names the text in messages and in the values (usually the path).
Value parse_json(std::string_view text, const std::string& origin);

}  // namespace tfm::io
