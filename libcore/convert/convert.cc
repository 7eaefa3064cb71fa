#include "libcore/convert/convert.h"

#include <filesystem>

#include "libcore/base/error.h"
#include "libcore/base/log.h"
#include "libcore/convert/sources.h"
#include "libcore/model/model_file.h"

namespace tfm::convert {
namespace {

// auto: a directory with config.json is Hugging Face's, a .npz Marian's, a
// .pt fairseq's.
std::string source_kind(const ConvertOptions& o) {
  namespace fs = std::filesystem;
  TFM_REQUIRE(fs::exists(o.input), "{} does not exist", o.input);
  if (o.from != "auto") return o.from;
  if (fs::is_directory(o.input)) {
    TFM_REQUIRE(fs::exists(fs::path(o.input) / "config.json"),
                "{} is a directory without config.json: not a Hugging Face model (--from says which toolkit)",
                o.input);
    return "hf";
  }
  if (o.input.ends_with(".npz")) return "marian";
  if (o.input.ends_with(".pt")) return "fairseq";
  fail("cannot tell which toolkit wrote {}: give a Hugging Face model directory, a Marian .npz or a fairseq .pt "
       "(--from)",
       o.input);
}

}  // namespace

ConvertReport convert_model(const ConvertOptions& o) {
  if (o.to == "ct2") {
    TFM_REQUIRE(o.from == "auto", "--to ct2 reads a tfm checkpoint, not --from {}", o.from);
    const ModelFile model(o.input);
    write_ct2(model, o.output, o.ct2);
    return {fmt::format("the tfm checkpoint {}", o.input), describe(model.config()), model.config().parameter_count(),
            model.config().vocab_size};
  }
  const std::string kind = source_kind(o);
  Converted c = kind == "hf" ? read_hf(o) : kind == "marian" ? read_marian(o) : read_fairseq(o);
  c.model.save(o.output, c.vocab);
  return {c.model.origin(), describe(c.model.config()), c.model.parameters(), c.vocab.size()};
}

}  // namespace tfm::convert
