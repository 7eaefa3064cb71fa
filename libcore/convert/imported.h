// Internal to libcore/convert: a tfm model being filled from another
// toolkit's tensors, and what every source's reader shares.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/data/vocab.h"
#include "libcore/io/value.h"
#include "libcore/model/config.h"
#include "libcore/model/weights.h"

namespace tfm::convert {

// Every parameter of the configuration's layout (params.h) must be set
// exactly once, from a floating-point tensor of its shape; save() checks
// that none is missing.
class ImportedModel {
 public:
  ImportedModel(std::string origin, const ModelConfig& config);

  const std::string& origin() const { return origin_; }
  const ModelConfig& config() const { return weights_->config(); }

  // Parameter `name` from `array`, the source's tensor `source`: of the
  // parameter's shape, or with `transposed` its transpose (Marian keeps
  // (in, out) where tfm keeps (out, in)); leading dimensions of 1 are
  // dropped (a (1, V) bias is a (V) one). `rows`: only the first rows of
  // the parameter (the rest stays 0: a row a converter appends).
  void set(std::string_view name, const io::Array& array, std::string_view source, bool transposed = false,
           int64_t rows = -1);
  // Whether `name` has been set.
  bool has(std::string_view name) const;

  // Writes the checkpoint, `vocab` embedded, atomically; every parameter
  // must have been set, and the vocabulary must have vocab_size pieces.
  void save(const std::string& path, const Vocab& vocab) const;
  int64_t parameters() const { return weights_->layout().count(); }

 private:
  std::string origin_;
  std::unique_ptr<ModelWeights> weights_;
  std::vector<std::string> set_from_;  // per layout entry: the source tensor's name, "" until set
};

// What a converter says about a model: "6 + 6 layers, d_model 512, 8 heads,
// d_ff 2048, silu, post-norm".
std::string describe(const ModelConfig& c);

// "FIELD = VALUE" in one line, for the refusals of what tfm cannot
// represent: "the Hugging Face model in DIR: activation_function = gelu_new
// is not one tfm has (relu, gelu, silu)".
[[noreturn]] void refuse(std::string_view origin, std::string_view field, std::string_view value,
                         std::string_view why);

// A configuration's field `key` (a dict's member; null counts as absent),
// or `fallback`, the source toolkit's default, when it has none.
int64_t int_or(const io::Value& config, std::string_view key, int64_t fallback);
bool bool_or(const io::Value& config, std::string_view key, bool fallback);
double float_or(const io::Value& config, std::string_view key, double fallback);
std::string string_or(const io::Value& config, std::string_view key, std::string fallback);

// A piece table from a "piece: id" mapping (vocab.json, Marian's .yml):
// every id from 0 to `size` - 1 exactly once; `path` names the file in
// errors.
std::vector<std::string> pieces_by_id(const io::Value& map, const std::string& path, int64_t size);

// The file at `given`, or else `name` in `dir` when it exists; "" when neither.
std::string beside(const std::string& given, const std::string& dir, std::string_view name);

// The SentencePiece models and the piece table (ids in order) as one Vocab;
// errors name `origin`.
Vocab bundle(const std::string& source_spm, const std::string& target_spm, std::vector<std::string> pieces,
             std::string_view origin);

}  // namespace tfm::convert
