// Model scores (tfm-score -m, libcore/eval/model_score.h) on CUDA against
// the CPU: the whole job from a checkpoint and files of ids in fp32, and
// score_pairs over a bf16 model (what a GPU computes in; tfm-score itself
// offers fp32 and int8). The plan packs batches to --max-tokens exactly,
// so on CUDA some batches get padded attention tiles and some, with more
// rows than the plan's head rows allow, their own odd lengths (upload.cc).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include "libcore/eval/model_score.h"
#include "libcore/model/model_file.h"
#include "libcore/model/model_io.h"
#include "tests/support.h"

using namespace tfm;
using namespace tfm::eval;

namespace {

// Pairs of ids in [4, V) (no pad, unk, bos or eos), of 1..24 and 0..24 ids (support.h).
Pairs random_pairs(size_t n, int64_t V, uint32_t seed) {
  auto [src, tgt] = test::random_pairs(n, V, seed, 24);
  return {std::move(src), std::move(tgt)};
}

void write_ids(const std::string& path, const std::vector<std::vector<int32_t>>& lines) {
  std::ofstream out(path);
  for (const auto& line : lines) {
    for (size_t i = 0; i < line.size(); ++i) out << (i ? " " : "") << line[i];
    out << "\n";
  }
}

// Every token's log-probability of `got` within atol + rtol |want|, and each
// sentence's total within the sum of its tokens' allowances.
void require_scores_close(const ModelScores& got, const ModelScores& want, double atol, double rtol) {
  REQUIRE(got.sentences.size() == want.sentences.size());
  CHECK(got.tokens == want.tokens);
  double worst_share = 0;
  size_t worst_sentence = 0;
  for (size_t i = 0; i < want.sentences.size(); ++i) {
    const SentenceScore &g = got.sentences[i], &w = want.sentences[i];
    REQUIRE(g.token_log_probs.size() == w.token_log_probs.size());
    double allowed_total = 0;
    for (size_t t = 0; t < w.token_log_probs.size(); ++t) {
      const double allowed = atol + rtol * std::abs(w.token_log_probs[t]);
      const double share = std::abs(g.token_log_probs[t] - w.token_log_probs[t]) / allowed;
      if (!(share <= worst_share)) {
        worst_share = share;
        worst_sentence = i;
      }
      allowed_total += allowed;
    }
    INFO("sentence " << i << ": log-prob " << g.log_prob << ", cpu " << w.log_prob);
    CHECK(std::abs(g.log_prob - w.log_prob) <= allowed_total);
  }
  INFO("worst token in sentence " << worst_sentence << ", " << 100 * worst_share << "% of its tolerance");
  CHECK(worst_share <= 1.0);
}

}  // namespace

TEST_CASE("model scores (tfm-score -m) on cuda match the cpu in fp32 and bf16", "[score]") {
  // Row B's shapes (heads of 20 and 12), as decode_test.cc's.
  ModelConfig c = ModelConfig::preset("tiny");
  c.parse("vocab_size = 97\nd_model = 48\nd_ff = 80\nheads = 3\nd_k = 20\nd_v = 12");
  const test::TempDir dir;
  {
    ModelWeights m(c, Device::cpu());
    m.init(14);
    save_model(dir.file("model.bin"), m);
  }
  const Pairs pairs = random_pairs(40, c.vocab_size, 3);
  write_ids(dir.file("src.ids"), pairs.src);
  write_ids(dir.file("tgt.ids"), pairs.tgt);
  const ModelFile file(dir.file("model.bin"));

  ModelScoreOptions o;
  o.src = dir.file("src.ids");
  o.tgt = dir.file("tgt.ids");
  o.ids = true;
  o.max_tokens = 60;  // several batches of several sizes
  const ModelScores want = score_with_model(file, o);
  REQUIRE(want.sentences.size() == pairs.src.size());
  o.device = Device::cuda(0);
  const ModelScores got = score_with_model(file, o);
  {
    INFO("fp32: perplexity cuda " << got.perplexity() << ", cpu " << want.perplexity());
    // decode_test.cc's tolerance for the decoder's log-probabilities.
    require_scores_close(got, want, 1e-4, 1e-5);
    CHECK(std::abs(got.perplexity() - want.perplexity()) <= 1e-4 * want.perplexity());
  }

  // bf16: the plan score_with_model makes, a bf16 model of the checkpoint.
  const ScoringPlan plan = plan_scoring(pairs, o.max_tokens, c);
  REQUIRE(plan.batches.size() > 2);
  const std::unique_ptr<Transformer> model = file.load_model(plan.limits, Device::cuda(0), Precision::bf16);
  REQUIRE(model->dtype() == DType::bf16);
  const ModelScores half = score_pairs(*model, pairs, plan);
  INFO("bf16: perplexity cuda " << half.perplexity() << ", cpu " << want.perplexity());
  // Activations and logits of 8-bit mantissas: a few hundredths a token
  // (model_test.cc's bf16 loss tolerance is 2e-2 of the loss); a token
  // scored at the wrong row or against the wrong target is off by about 1.
  require_scores_close(half, want, 0.1, 2e-2);
  CHECK(std::abs(half.log_prob - want.log_prob) <= 2e-2 * std::abs(want.log_prob));
}
