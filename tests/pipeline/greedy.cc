// greedy: greedy decoding of a trained checkpoint, for the pipeline tests
// until tfm-decode exists (then they switch to it).
//
//   greedy MODEL.bin < source ids > hypothesis ids
//
// One sentence a line as space-separated ids (tfm-tok --ids) in, the same
// out. Decodes with libcore's IncrementalDecoder, 64 sentences at a time,
// up to (source length + 10) tokens each, stopping at eos.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "libcore/error.h"
#include "libcore/model/incremental.h"
#include "libcore/model/model_io.h"

using namespace tfm;

namespace {

constexpr size_t kRows = 64;
constexpr int64_t kExtraSteps = 10;

std::vector<std::vector<int32_t>> decode(const std::string& path,
                                         const std::vector<std::vector<int32_t>>& sources) {
  int64_t longest = 1;
  for (const auto& s : sources) longest = std::max<int64_t>(longest, static_cast<int64_t>(s.size()));
  const int64_t steps = longest + kExtraSteps;
  ModelLimits limits;
  limits.max_len = std::max(longest, steps);
  limits.max_tokens = static_cast<int64_t>(kRows) * limits.max_len;
  const auto model = load_model(path, limits, Device::cpu());
  const int64_t V = model->config().vocab_size;
  std::vector<std::vector<int32_t>> out;
  for (size_t first = 0; first < sources.size(); first += kRows) {
    const std::vector<std::vector<int32_t>> part(
        sources.begin() + static_cast<int64_t>(first),
        sources.begin() + static_cast<int64_t>(std::min(sources.size(), first + kRows)));
    const auto rows = static_cast<int64_t>(part.size());
    IncrementalDecoder decoder(*model, rows, longest, steps);
    decoder.start(part);
    std::vector<std::vector<int32_t>> hyp(part.size());
    std::vector<bool> done(part.size(), false);
    std::vector<int32_t> tokens(part.size(), kBosId);
    for (int64_t t = 0; t < steps; ++t) {
      const TensorView logp = decoder.step(tokens);  // (rows, V) on the CPU
      const float* p = logp.data_as<float>();
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = p + r * V;
        const auto best = static_cast<int32_t>(std::max_element(row, row + V) - row);
        tokens[static_cast<size_t>(r)] = done[static_cast<size_t>(r)] ? kEosId : best;
        if (done[static_cast<size_t>(r)]) continue;
        if (best == kEosId) done[static_cast<size_t>(r)] = true;
        else hyp[static_cast<size_t>(r)].push_back(best);
      }
      if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    }
    out.insert(out.end(), hyp.begin(), hyp.end());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: greedy MODEL.bin < ids > ids\n");
    return 2;
  }
  try {
    std::vector<std::vector<int32_t>> sources;
    std::string line;
    while (std::getline(std::cin, line)) {
      std::istringstream in(line);
      std::vector<int32_t> ids;
      for (int32_t id; in >> id;) ids.push_back(id);
      TFM_REQUIRE(!ids.empty(), "line {} of the input is empty", sources.size() + 1);
      sources.push_back(std::move(ids));
    }
    for (const auto& h : decode(argv[1], sources)) {
      std::string text;
      for (size_t i = 0; i < h.size(); ++i) text += fmt::format("{}{}", i ? " " : "", h[i]);
      std::printf("%s\n", text.c_str());
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "greedy: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
