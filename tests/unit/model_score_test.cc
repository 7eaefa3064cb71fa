// Model scores (libcore/eval/model_score.h): equal to Transformer::log_probs
// read directly, whatever the batching, in input order; the plan respects
// --max-tokens; bad input is one Error naming FILE:LINE.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include "libcore/eval/model_score.h"
#include "libcore/model/model_io.h"

#include "tests/support.h"

using namespace tfm;
using namespace tfm::eval;
using Catch::Contains;
using test::error_of;

namespace {

// Pairs of ids in [4, V) (no pad, unk, bos or eos), of 1..12 and 0..12 ids (support.h).
Pairs random_pairs(size_t n, int64_t V, uint32_t seed) {
  auto [src, tgt] = test::random_pairs(n, V, seed, 12);
  return {std::move(src), std::move(tgt)};
}

// The reference: every pair in one batch, log p(y_t) read straight from
// Transformer::log_probs's (B * T, V) rows.
std::vector<std::vector<double>> direct(const ModelConfig& config, DType dtype, const Pairs& p) {
  Transformer model(config, ModelLimits{4096, 64, 1024}, Device::cpu(), dtype);
  model.init(11);
  const HostBatch b = HostBatch::from_pairs(p.src, p.tgt);
  const std::vector<double> lp = test::to_f64(model.log_probs(b).view());
  std::vector<std::vector<double>> out(p.src.size());
  for (size_t i = 0; i < p.src.size(); ++i)
    for (int64_t t = 0; t <= static_cast<int64_t>(p.tgt[i].size()); ++t) {
      const int64_t row = static_cast<int64_t>(i) * b.tgt_len + t;
      const int32_t y = t < static_cast<int64_t>(p.tgt[i].size()) ? p.tgt[i][static_cast<size_t>(t)] : kEosId;
      out[i].push_back(lp[static_cast<size_t>(row * config.vocab_size + y)]);
    }
  return out;
}

ModelScores scored(const ModelConfig& config, DType dtype, const Pairs& p, int64_t max_tokens) {
  const ScoringPlan plan = plan_scoring(p, max_tokens, config);
  Transformer model(config, plan.limits, Device::cpu(), dtype);
  model.init(11);
  return score_pairs(model, p, plan);
}


}  // namespace

TEST_CASE("model score: equals Transformer::log_probs, for any --max-tokens", "[model_score]") {
  const ModelConfig config = ModelConfig::preset("tiny");
  const Pairs pairs = random_pairs(23, config.vocab_size, 5);
  for (DType dtype : {DType::f64, DType::f32}) {
    const std::vector<std::vector<double>> want = direct(config, dtype, pairs);
    // f64: the batching may change only the last bits; f32: the GEMMs' rounding.
    const double tol = dtype == DType::f64 ? 1e-12 : 2e-5;
    for (int64_t max_tokens : {1, 13, 40, 100000}) {
      INFO(dtype_name(dtype) << ", max_tokens " << max_tokens);
      const ModelScores s = scored(config, dtype, pairs, max_tokens);
      REQUIRE(s.sentences.size() == pairs.src.size());
      double worst = 0, total = 0;
      int64_t tokens = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        REQUIRE(s.sentences[i].token_log_probs.size() == want[i].size());
        double sum = 0;
        for (size_t t = 0; t < want[i].size(); ++t) {
          const double got = s.sentences[i].token_log_probs[t];
          CHECK(got < 0);
          worst = std::max(worst, std::abs(got - want[i][t]) / (1 + std::abs(want[i][t])));
          sum += got;
        }
        CHECK(s.sentences[i].log_prob == sum);
        total += sum;
        tokens += static_cast<int64_t>(want[i].size());
      }
      CHECK(worst <= tol);
      CHECK(s.tokens == tokens);
      CHECK(s.log_prob == total);
      CHECK(s.perplexity() == std::exp(-total / static_cast<double>(tokens)));
    }
  }
}

TEST_CASE("model score: the plan keeps batches within --max-tokens", "[model_score]") {
  const ModelConfig config = ModelConfig::preset("tiny");
  const Pairs pairs = random_pairs(50, config.vocab_size, 9);
  for (int64_t max_tokens : {1, 20, 64, 1000}) {
    INFO("max_tokens " << max_tokens);
    const ScoringPlan plan = plan_scoring(pairs, max_tokens, config);
    std::vector<int> seen(pairs.src.size());
    int64_t planned = 0;
    for (const auto& batch : plan.batches) {
      int64_t s = 0, t = 0;
      for (size_t i : batch) {
        ++seen[i];
        s = std::max<int64_t>(s, static_cast<int64_t>(pairs.src[i].size()));
        t = std::max<int64_t>(t, static_cast<int64_t>(pairs.tgt[i].size()) + 1);
      }
      const int64_t b = static_cast<int64_t>(batch.size());
      if (b > 1) CHECK(b * std::max(s, t) <= max_tokens);  // a longer pair goes alone
      planned = std::max(planned, b * std::max(s, t));
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    CHECK(plan.limits.max_tokens == planned);
  }
  ModelConfig small = config;
  small.max_positions = 5;
  CHECK_THAT(error_of([&] { plan_scoring(pairs, 100, small); }),
             Contains("longer than the model's 5 positions") && Contains("(line "));
}

TEST_CASE("model score: ids from files, and bad input named by FILE:LINE", "[model_score]") {
  test::TempDir dir;
  auto put = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.file(name)) << text;
    return dir.file(name);
  };
  const std::string src = put("src", "5 6 7\n8\n"), tgt = put("tgt", "9 10\n\n");
  const Pairs p = read_pairs(src, tgt, nullptr, 64);
  CHECK(p.src == std::vector<std::vector<int32_t>>{{5, 6, 7}, {8}});
  CHECK(p.tgt == std::vector<std::vector<int32_t>>{{9, 10}, {}});
  CHECK_THAT(error_of([&] { read_pairs(src, put("short", "1\n"), nullptr, 64); }),
             Contains("src has 2 lines but") && Contains("short has 1"));
  CHECK_THAT(error_of([&] { read_pairs(put("empty_src", "5\n\n"), tgt, nullptr, 64); }),
             Contains("an empty source") && Contains("empty_src:2"));
  CHECK_THAT(error_of([&] { read_pairs(src, put("big", "9 64\n1\n"), nullptr, 64); }),
             Contains("token id 64 is outside the model's vocabulary [0, 64)") && Contains("big:1"));
  CHECK_THAT(error_of([&] { read_pairs(src, put("word", "9\nabc\n"), nullptr, 64); }),
             Contains("'abc' is not a token id") && Contains("word:2"));
  CHECK_THAT(error_of([&] { read_pairs(put("none", ""), put("none2", ""), nullptr, 64); }),
             Contains("hold no sentence pairs"));
}

TEST_CASE("model score: from a checkpoint, as the program runs it", "[model_score]") {
  test::TempDir dir;
  const ModelConfig config = ModelConfig::preset("tiny");
  Transformer model(config, ModelLimits{256, 64, 256}, Device::cpu());
  model.init(11);
  save_model(dir.file("m.bin"), model);
  std::ofstream(dir.file("src")) << "5 6 7\n8 9\n";
  std::ofstream(dir.file("tgt")) << "9 10\n11\n";
  ModelScoreOptions o;
  o.src = dir.file("src");
  o.tgt = dir.file("tgt");
  o.ids = true;
  const ModelScores s = score_with_model(ModelFile(dir.file("m.bin")), o);
  const Pairs p = read_pairs(o.src, o.tgt, nullptr, config.vocab_size);
  const auto want = direct(config, DType::f32, p);
  REQUIRE(s.sentences.size() == 2);
  for (size_t i = 0; i < 2; ++i)
    for (size_t t = 0; t < want[i].size(); ++t)
      CHECK(s.sentences[i].token_log_probs[t] == Approx(want[i][t]).epsilon(1e-5));
  FormatOptions f;
  f.width = 2;
  CHECK_THAT(format_model_corpus(s, f), Catch::StartsWith("PPL = ") && Contains("tokens = 5, sentences = 2)"));
  f.score_only = true;
  CHECK(format_model_sentences(s, f) ==
        fmt::format("{:.2f}\n{:.2f}\n", s.sentences[0].log_prob, s.sentences[1].log_prob));
}
