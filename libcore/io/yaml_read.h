// Reading the subset of YAML that Marian writes into an io::Value dict, in
// file order: its model.yml (configuration) and its vocabulary .yml files.
//
// The subset, one top-level mapping:
//   key: value          a plain, 'single-quoted' or "double-quoted" key
//   key:                followed by a block list at any indentation:
//     - item              (or by nothing: null)
//   ? key               an explicit key (PyYAML writes "" and line breaks
//   : value             so)
//   # comments, blank lines, a leading "---"
// A value is a quoted string (single: '' is a quote; double: the escapes
// \0 \a \b \t \n \v \f \r \e \" \/ \\ \N \_ \L \P \xNN \uNNNN \UNNNNNNNN,
// \xNN naming the code point U+00NN), a flow list [a, "b", [c]], a flow
// mapping {k: v}, or a plain scalar typed as YAML 1.2's core schema: null
// (~, null, empty), bool (true, false), int (decimal, 0x, 0o; outside int64
// a float), float (1.5, 1e-8, .inf, .nan), else a string. Keys are always
// strings ("true: 3" in a vocabulary is the piece "true").
//
// Anything else (nested mappings, block scalars | >, anchors, aliases,
// tags, multi-line scalars, a key given twice) is one Error whose where()
// is ORIGIN:LINE.
#pragma once

#include <string>
#include <string_view>

#include "libcore/io/value.h"

namespace tfm::io {

Value parse_yaml(std::string_view text, const std::string& origin);

}  // namespace tfm::io
