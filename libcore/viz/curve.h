// tfm-train plot: the learning curves of a training run as one SVG figure,
// from the records of tfm-train --log (libcore/train/progress.h): the
// training loss of every "train" record (the mean over its --log-every
// updates) and the dev perplexity of every "valid" record, against updates;
// two panels over one axis of updates, perplexity on a log scale.
//
// A log a resumed run appended to holds the updates after the checkpoint it
// resumed from twice: the later records win (a point of an update at or
// past one read again is dropped).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tfm::viz {

struct CurvePoint {
  int64_t step = 0;
  double value = 0;
};

struct Curves {
  std::vector<CurvePoint> train_loss;  // "train" records: loss
  std::vector<CurvePoint> dev_ppl;     // "valid" records: ppl
};

// Reads a --log file. Error naming FILE:LINE for a line that is not one
// JSON record of tfm-train, and for a log without any train or valid record.
Curves read_curves(const std::string& log_path);

// The figure: 640 x 480, `title` on top; an empty series is said in its panel.
std::string curves_svg(const Curves& curves, const std::string& title);

}  // namespace tfm::viz
