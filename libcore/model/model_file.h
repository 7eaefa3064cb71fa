// A model checkpoint opened once (io::CheckpointReader) and checked once:
// what every reader of one holds and passes down (tfm-decode, tfm-score -m,
// tfm-attnviz, tfm-train --resume). Opening applies the one validation of a
// model checkpoint (model_check.h), so that no program accepts a file
// another refuses: its configuration and tensor table, and its embedded
// vocabulary, parsed once, against vocab_size.
#pragma once

#include <memory>
#include <string>

#include "libcore/base/precision.h"
#include "libcore/data/vocab.h"
#include "libcore/io/checkpoint.h"
#include "libcore/model/config.h"
#include "libcore/model/transformer.h"

namespace tfm {

class ModelFile {
 public:
  // Opens and checks `path`; one Error naming the file and what disagrees.
  explicit ModelFile(const std::string& path) : ModelFile(io::CheckpointReader(path)) {}
  explicit ModelFile(io::CheckpointReader reader);
  ModelFile(ModelFile&&) noexcept = default;
  ModelFile& operator=(ModelFile&&) noexcept = default;

  const std::string& path() const { return reader_.path(); }
  const ModelConfig& config() const { return config_; }
  // The open file: its tensor table, the training state's sections.
  const io::CheckpointReader& reader() const { return reader_; }
  // The embedded SentencePiece model; null when the checkpoint has none.
  const Vocab* vocab() const { return vocab_.get(); }

  // Reads the parameters into a model (or weights) of this configuration.
  void load_parameters(ModelWeights& model) const;
  // The model this checkpoint describes, with `limits` on `device`
  // computing in `precision`, resolved for it (precision.h): its
  // parameters loaded, and their 16-bit or 8-bit copy made.
  std::unique_ptr<Transformer> load_model(const ModelLimits& limits, Device device,
                                          Precision precision = Precision::fp32) const;
  // The weights alone, for decoding (ModelWeights: no training or scoring
  // memory), loaded likewise.
  std::unique_ptr<ModelWeights> load_weights(Device device, Precision precision = Precision::fp32) const;

 private:
  io::CheckpointReader reader_;
  ModelConfig config_;
  std::unique_ptr<Vocab> vocab_;
};

}  // namespace tfm
