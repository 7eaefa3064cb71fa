// Resuming on CUDA (libcore/train/state.h, as tfm-train --resume does it):
// a run that writes a checkpoint after N updates and goes on for M more,
// and a run that loads that checkpoint and trains the same M, end with the
// same parameters and Adam moments, bit for bit, on the same card.
//
// tfm-train promises bit-for-bit resumption on the CPU only: on CUDA the
// embedding gradient adds rows with atomicAdd (embedding.cu), so a batch
// in which one id appears twice adds in an order that may change from run
// to run. These batches hold one sentence each (two a update), with no id
// twice on either side (the source and the target embed in two launches,
// in stream order): every other kernel, and cuBLAS on one card, computes
// the same bits every time, so the resumed run must too. The loss sums'
// atomicAdd reaches the update only through the finiteness check.
#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>
#include <vector>

#include "libcore/io/checkpoint.h"
#include "libcore/model/model_file.h"
#include "libcore/train/state.h"
#include "libcore/train/step.h"
#include "tests/support.h"

using namespace tfm;
using namespace tfm::train;

namespace {

constexpr int64_t kVocab = 256;

// Micro-batch i of the run: one pair of 6..15 distinct ids on each side.
HostBatch micro_batch(int64_t i) {
  uint64_t x = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull + 77;
  const auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  const auto distinct = [&](size_t n) {
    std::vector<int32_t> pool(kVocab - 4);
    std::iota(pool.begin(), pool.end(), 4);
    for (size_t k = 0; k < n; ++k) std::swap(pool[k], pool[k + next() % (pool.size() - k)]);
    return std::vector<int32_t>(pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(n));
  };
  const std::vector<int32_t> src = distinct(6 + next() % 10), tgt = distinct(6 + next() % 10);
  return HostBatch::from_pairs({src}, {tgt});
}

ModelConfig resume_config() {
  ModelConfig c = ModelConfig::preset("tiny");
  c.vocab_size = kVocab;
  c.d_model = 64;
  c.d_ff = 128;
  c.d_k = 16;
  c.d_v = 16;
  c.dropout = 0.1f;  // masks keyed by the micro-batch counter the state carries
  c.attention_dropout = 0.1f;
  return c;
}

ModelLimits resume_limits() {
  ModelLimits l;
  l.max_tokens = 32;
  l.max_len = 24;
  l.loss_chunk = 8;
  return l;
}

// Updates first .. last (1-based, all applied), two micro-batches each, as
// tfm-train numbers them: update u takes micro-batches 2 (u - 1) and
// 2 (u - 1) + 1, whose dropout counters they are, and the schedule's rate
// at u.
void train_updates(Transformer& model, Adam& adam, LossScaler& scaler, int64_t first, int64_t last) {
  for (int64_t u = first; u <= last; ++u) {
    StepConfig sc;
    sc.step = u;
    sc.lr = noam_learning_rate(u, 64, 4);
    sc.seed = 19;
    sc.rng_counter = static_cast<uint32_t>(2 * (u - 1));
    sc.clip_norm = 0.5;
    const std::vector<HostBatch> batches = {micro_batch(2 * (u - 1)), micro_batch(2 * (u - 1) + 1)};
    const StepResult r = train_step(model, adam, batches, sc, scaler);
    INFO("update " << u << ": loss " << r.sums.loss);
    REQUIRE(r.outcome == StepOutcome::applied);
  }
}

}  // namespace

TEST_CASE("training resumed from a checkpoint on cuda continues bit for bit (fp32, fp16)", "[train][resume]") {
  constexpr int64_t N = 3, M = 3;
  const ModelConfig c = resume_config();
  for (DType dtype : {DType::f32, DType::f16}) {
    INFO(dtype_name(dtype));
    const test::TempDir dir;
    const std::string path = dir.file("checkpoint_3.bin");
    // fp16: a dynamic scale one clean update short of doubling at the
    // checkpoint, so the resumed run must carry the streak to double it.
    const auto new_scaler = [&] {
      LossScaler s(dtype == DType::f16);
      if (s.dynamic()) s.restore(256, LossScaler::kInterval - N - 1);
      return s;
    };

    // The run that is interrupted: N updates, a checkpoint, M more.
    Transformer a(c, resume_limits(), Device::cuda(0), dtype);
    a.init(31);
    Adam adam_a(a.optimizer_state().first, a.optimizer_state().second);
    LossScaler scaler_a = new_scaler();
    train_updates(a, adam_a, scaler_a, 1, N);
    const Tensor saved_params = test::to_device(a.params(), Device::cpu());
    const Tensor saved_m = test::to_device(a.optimizer_state().first, Device::cpu());
    const Tensor saved_v = test::to_device(a.optimizer_state().second, Device::cpu());
    TrainState state;
    state.step = N;
    state.micro_batches = 2 * N;
    state.loss_scale = scaler_a.scale();
    state.loss_scale_streak = scaler_a.streak();
    state.batches = 2 * (N + M);
    state.corpus = {"spm-0123456789abcdef", 2 * (N + M), 200, 200, "00ff00ff00ff00ff"};
    state.options.set("update-freq", "2");
    state.options.set("clip-norm", "0.5");
    state.options.set("precision", dtype == DType::f16 ? "fp16" : "fp32");
    save_checkpoint(path, a, "", state);
    train_updates(a, adam_a, scaler_a, N + 1, N + M);

    // The same N + M updates without a checkpoint: if these differ, the
    // GPU is not deterministic for these batches, and the comparison
    // below says nothing about resuming.
    Transformer again(c, resume_limits(), Device::cuda(0), dtype);
    again.init(31);
    Adam adam_again(again.optimizer_state().first, again.optimizer_state().second);
    LossScaler scaler_again = new_scaler();
    train_updates(again, adam_again, scaler_again, 1, N + M);
    INFO("if the next line fails, two uninterrupted runs differ: a kernel of the update is not "
         "deterministic on this card for these batches");
    REQUIRE(test::same_bits(again.params(), a.params()));

    // The resumed run: a fresh model, the checkpoint's parameters, moments
    // and state (setup.cc's continue_from), then the same M updates.
    const ModelFile file(path);
    REQUIRE(file.config() == c);  // dropout included: the masks depend on it
    const TrainState read = read_state(file.reader());
    CHECK(read == state);
    Transformer b(file.config(), resume_limits(), Device::cuda(0), dtype);
    load_checkpoint(file, b);
    CHECK(test::same_bits(b.params(), saved_params));
    CHECK(test::same_bits(b.optimizer_state().first, saved_m));
    CHECK(test::same_bits(b.optimizer_state().second, saved_v));
    Adam adam_b(b.optimizer_state().first, b.optimizer_state().second);
    LossScaler scaler_b(dtype == DType::f16);
    scaler_b.restore(read.loss_scale, read.loss_scale_streak);
    REQUIRE(read.micro_batches == 2 * read.step);  // train_updates' numbering
    train_updates(b, adam_b, scaler_b, read.step + 1, N + M);

    CHECK(test::same_bits(b.params(), a.params()));
    CHECK(test::same_bits(b.optimizer_state().first, a.optimizer_state().first));
    CHECK(test::same_bits(b.optimizer_state().second, a.optimizer_state().second));
    CHECK(scaler_b.scale() == scaler_a.scale());
    CHECK(scaler_b.streak() == scaler_a.streak());
    if (dtype == DType::f16) CHECK(scaler_a.scale() == 512);  // doubled once, after the checkpoint
    // Not a vacuous run: the M updates moved the parameters.
    CHECK_FALSE(test::same_bits(a.params(), saved_params));
  }
}
