// The one validation of a model checkpoint (issue 19): what every reader
// of one applies before it uses it, so that no program accepts a file
// another refuses. Apart from model_io so that it needs no model code (the
// fuzz target of the checkpoint reader links it alone).
#pragma once

#include <string>

#include "libcore/io/checkpoint.h"
#include "libcore/model/config.h"

namespace tfm {

// The one validation of a model checkpoint, which every reader of one
// applies before it uses it (tfm-decode, tfm-score -m, tfm-attnviz,
// tfm-train --resume, tfm-avgckpt): its configuration parses within every
// knob's range and is consistent (ModelConfig::validate); its tensor table
// is exactly the layout that configuration makes (every name, every shape,
// a floating-point dtype); its embedded vocabulary, when it has one, has
// vocab_size pieces. Returns the configuration; one Error naming the file
// and what disagrees otherwise.
ModelConfig checked_model_config(const std::string& path, const io::CheckpointInfo& info);

}  // namespace tfm
