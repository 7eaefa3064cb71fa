// The training loop's pieces (libcore/train/step.h, data.h): the loss
// scaler, the seeded batch order, batches from a corpus, gradient
// accumulation, and skipping NaN steps.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "libcore/base/error.h"
#include "libcore/train/data.h"
#include "libcore/train/step.h"
#include "tests/support.h"

using namespace tfm;
using namespace tfm::train;
using Catch::Contains;

namespace {

struct TokenPair {
  std::vector<int32_t> src, tgt;
};

// Seeded pairs of ids in [4, vocab).
std::vector<TokenPair> pairs(size_t n, int32_t vocab, uint64_t seed) {
  std::vector<TokenPair> out(n);
  uint64_t r = seed;
  auto next = [&](int32_t m) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int32_t>((r >> 33) % static_cast<uint64_t>(m));
  };
  for (auto& p : out) {
    p.src.resize(static_cast<size_t>(1 + next(9)));
    p.tgt.resize(static_cast<size_t>(1 + next(9)));
    for (auto& x : p.src) x = 4 + next(vocab - 4);
    for (auto& x : p.tgt) x = 4 + next(vocab - 4);
  }
  return out;
}

PairStore store_of(const std::vector<TokenPair>& ps, int64_t vocab) {
  PairStore store(vocab);
  for (const TokenPair& p : ps) store.add(p.src, p.tgt);
  return store;
}

HostBatch batch_of(const std::vector<TokenPair>& ps, size_t first, size_t count) {
  std::vector<std::vector<int32_t>> s, t;
  for (size_t i = first; i < first + count; ++i) {
    s.push_back(ps[i].src);
    t.push_back(ps[i].tgt);
  }
  return HostBatch::from_pairs(s, t);
}

ModelConfig tiny_without_dropout() {
  ModelConfig c = ModelConfig::preset("tiny");
  c.vocab_size = 40;
  c.dropout = 0.0f;
  return c;
}

ModelLimits small_limits() {
  ModelLimits l;
  l.max_tokens = 128;
  l.max_len = 12;
  return l;
}

}  // namespace

TEST_CASE("the loss scaler backs off on overflow and grows after clean steps", "[train]") {
  LossScaler fixed(false);
  fixed.update(true);
  CHECK(fixed.scale() == 1);
  CHECK_FALSE(fixed.can_back_off());

  LossScaler s(true);
  CHECK(s.scale() == LossScaler::kInitial);
  s.update(true);
  CHECK(s.scale() == LossScaler::kInitial / 2);
  for (int64_t i = 0; i < LossScaler::kInterval - 1; ++i) s.update(false);
  CHECK(s.scale() == LossScaler::kInitial / 2);
  s.update(false);
  CHECK(s.scale() == LossScaler::kInitial);
  CHECK(s.streak() == 0);
  s.restore(2, 5);
  s.update(true);
  s.update(true);
  CHECK(s.scale() == 1);  // never below 1
  CHECK_FALSE(s.can_back_off());
  REQUIRE_THROWS_WITH(s.restore(0.5, 0), Contains("not a valid state"));
}

TEST_CASE("the batch order is a seeded permutation per epoch", "[train]") {
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{27}, size_t{1000}}) {
    const std::vector<uint32_t> a = epoch_order(n, 1, 1);
    std::vector<uint32_t> sorted = a;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < n; ++i) REQUIRE(sorted[i] == i);
    CHECK(epoch_order(n, 1, 1) == a);  // a pure function of (n, seed, epoch)
  }
  const std::vector<uint32_t> a = epoch_order(1000, 1, 1);
  CHECK(epoch_order(1000, 1, 2) != a);
  CHECK(epoch_order(1000, 2, 1) != a);
  // Shuffled, not rotated: few batches stay where they were.
  size_t fixed = 0;
  for (size_t i = 0; i < a.size(); ++i) fixed += a[i] == i;
  CHECK(fixed < 10);
  // Pinned: a change here changes every run's batch order (and breaks
  // resuming checkpoints written before it).
  CHECK(epoch_order(6, 1, 1) == std::vector<uint32_t>{5, 2, 3, 0, 4, 1});
}

TEST_CASE("batches from a corpus: every pair once, limits that cover them", "[train]") {
  const test::TempDir dir;
  const std::string path = dir.file("c.tfmb");
  write_corpus(path, {"spm-0123456789abcdef", 40, 100, 40}, store_of(pairs(300, 40, 3), 40));
  const BatchSource as_packed(path, 0);
  const BatchSource repacked(path, 20);
  CHECK(as_packed.max_tokens() == 40);
  CHECK(repacked.max_tokens() == 20);
  CHECK(repacked.size() > as_packed.size());
  for (const BatchSource* src : {&as_packed, &repacked}) {
    const ModelLimits lim = src->limits();
    size_t sentences = 0;
    for (size_t i = 0; i < src->size(); ++i) {
      const HostBatch b = src->batch(i);
      sentences += static_cast<size_t>(b.batch);
      CHECK(b.target_tokens == src->target_tokens(i));
      CHECK(b.batch * b.src_len <= lim.max_tokens);
      CHECK(b.batch * b.tgt_len <= lim.max_tokens);
      CHECK(std::max(b.src_len, b.tgt_len) <= lim.max_len);
    }
    CHECK(sentences == 300);
  }
  CHECK(as_packed.identity() == repacked.identity());
  auto other = pairs(300, 40, 3);
  other[17].tgt[0] = other[17].tgt[0] == 5 ? 6 : 5;
  write_corpus(dir.file("d.tfmb"), {"spm-0123456789abcdef", 40, 100, 40}, store_of(other, 40));
  CHECK(BatchSource(dir.file("d.tfmb"), 0).identity().digest != as_packed.identity().digest);
}

TEST_CASE("two accumulated half batches give the gradient of the whole batch", "[train]") {
  const std::vector<TokenPair> ps = pairs(8, 40, 11);
  const HostBatch whole = batch_of(ps, 0, 8);
  const std::vector<HostBatch> halves = {batch_of(ps, 0, 4), batch_of(ps, 4, 4)};
  Transformer one(tiny_without_dropout(), small_limits(), Device::cpu());
  Transformer two(tiny_without_dropout(), small_limits(), Device::cpu());
  one.init(4);
  two.init(4);
  Adam adam_one(one.optimizer_state().first, one.optimizer_state().second);
  Adam adam_two(two.optimizer_state().first, two.optimizer_state().second);
  LossScaler s1(false), s2(false);
  StepConfig sc;
  sc.lr = 1e-3;
  const StepResult a = train_step(one, adam_one, {whole}, sc, s1);
  const StepResult b = train_step(two, adam_two, halves, sc, s2);
  REQUIRE(a.outcome == StepOutcome::applied);
  REQUIRE(b.outcome == StepOutcome::applied);
  CHECK(a.sums.tokens == b.sums.tokens);
  CHECK(b.sums.loss == Approx(a.sums.loss).epsilon(1e-6));
  CHECK(b.grad_norm == Approx(a.grad_norm).epsilon(1e-5));
  // The gradients (of the mean token loss) agree to float rounding.
  const std::vector<double> ga = test::to_f64(one.grads()), gb = test::to_f64(two.grads());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < ga.size(); ++i) {
    worst = std::max(worst, std::abs(ga[i] - gb[i]));
    scale = std::max(scale, std::abs(ga[i]));
  }
  INFO("worst gradient difference " << worst << " of " << scale);
  CHECK(worst <= 1e-5 * scale);
  // Only the batching differs, not the update: the same parameters follow.
  const std::vector<double> pa = test::to_f64(one.params()), pb = test::to_f64(two.params());
  double moved = 0;
  for (size_t i = 0; i < pa.size(); ++i) moved = std::max(moved, std::abs(pa[i] - pb[i]));
  CHECK(moved <= 2 * sc.lr);
}

TEST_CASE("a NaN or infinite step is skipped and leaves the parameters alone", "[train]") {
  const std::vector<TokenPair> ps = pairs(6, 40, 12);
  const std::vector<HostBatch> batches = {batch_of(ps, 0, 6)};
  Transformer model(tiny_without_dropout(), small_limits(), Device::cpu());
  model.init(8);
  Adam adam(model.optimizer_state().first, model.optimizer_state().second);
  StepConfig sc;
  sc.lr = 1e-3;

  SECTION("a NaN parameter: the loss is NaN, the step is bad") {
    const TensorView w = model.param(model.layout().encoder[0].ffn.fc1.weight);
    w.data_as<float>()[3] = std::numeric_limits<float>::quiet_NaN();
    const Tensor before = test::to_device(model.params(), Device::cpu());
    LossScaler scaler(false);
    const StepResult r = train_step(model, adam, batches, sc, scaler);
    CHECK(r.outcome == StepOutcome::bad);
    CHECK_FALSE(std::isfinite(r.sums.loss));
    CHECK(std::memcmp(before.view().data(), model.params().data(), model.params().bytes()) == 0);
    for (const TensorView& moment : {model.optimizer_state().first, model.optimizer_state().second})
      for (double x : test::to_f64(moment)) REQUIRE(x == 0);
  }
  SECTION("a gradient that overflows under a loss scale: skipped, the scale halved") {
    LossScaler scaler(true);
    scaler.restore(1e38, 0);  // scaled gradients overflow f32; the loss itself is finite
    const Tensor before = test::to_device(model.params(), Device::cpu());
    const StepResult r = train_step(model, adam, batches, sc, scaler);
    CHECK(r.outcome == StepOutcome::overflow);
    CHECK(std::isfinite(r.sums.loss));
    CHECK(scaler.scale() == 5e37);
    CHECK(std::memcmp(before.view().data(), model.params().data(), model.params().bytes()) == 0);
    scaler.restore(1, 0);
    CHECK(train_step(model, adam, batches, sc, scaler).outcome == StepOutcome::applied);
  }
}

// The trainer queues update n + 1 before it reads update n (trainer.cc):
// the device gives n + 1 the number its predecessor's outcome calls for, so
// a run read one update late is the run read at once.
TEST_CASE("an update queued behind an unread one takes the number its outcome calls for", "[train]") {
  const std::vector<TokenPair> ps = pairs(12, 40, 21);
  const HostBatch a = batch_of(ps, 0, 6), b = batch_of(ps, 6, 6);
  const auto lr = [](int64_t step) { return noam_learning_rate(step, 32, 4); };
  const auto config = [&](int64_t step, int64_t retry_step) {
    StepConfig sc;
    sc.step = step;
    sc.lr = lr(step);
    sc.retry_step = retry_step;
    sc.retry_lr = retry_step > 0 ? lr(retry_step) : 0;
    sc.clip_norm = 0.5;  // clipping on: the factor comes from the device too
    return sc;
  };
  const auto bits = [](const Transformer& m) { return test::to_device(m.params(), Device::cpu()); };
  const auto same = [](const Tensor& x, const TensorView& y) {
    return std::memcmp(x.view().data(), y.data(), y.bytes()) == 0;
  };
  auto model = [] {
    auto m = std::make_unique<Transformer>(tiny_without_dropout(), small_limits(), Device::cpu());
    m->init(3);
    return m;
  };
  auto adam_of = [](Transformer& m) { return Adam(m.optimizer_state().first, m.optimizer_state().second); };
  LossScaler scaler(false);

  SECTION("the first update applied: the second is update 2") {
    auto now = model(), late = model();
    Adam adam_now = adam_of(*now), adam_late = adam_of(*late);
    REQUIRE(train_step(*now, adam_now, {a}, config(1, 0), scaler).outcome == StepOutcome::applied);
    REQUIRE(train_step(*now, adam_now, {b}, config(2, 0), scaler).outcome == StepOutcome::applied);
    const QueuedUpdate first = queue_update(*late, adam_late, {a}, config(1, 0), 1.0);
    const QueuedUpdate second = queue_update(*late, adam_late, {b}, config(2, 1), 1.0);
    CHECK(read_update(*late, first, scaler).outcome == StepOutcome::applied);
    CHECK(read_update(*late, second, scaler).outcome == StepOutcome::applied);
    CHECK(same(bits(*now), late->params()));
  }
  SECTION("the first update skipped: the second takes update 1 again") {
    auto now = model(), late = model();
    Adam adam_now = adam_of(*now), adam_late = adam_of(*late);
    REQUIRE(train_step(*now, adam_now, {b}, config(1, 0), scaler).outcome == StepOutcome::applied);
    // A loss scale of 1e38 overflows the gradient in f32: update 1 is skipped.
    const QueuedUpdate first = queue_update(*late, adam_late, {a}, config(1, 0), 1e38);
    const QueuedUpdate second = queue_update(*late, adam_late, {b}, config(2, 1), 1.0);
    CHECK(read_update(*late, first, scaler).outcome == StepOutcome::bad);
    const StepResult r = read_update(*late, second, scaler);
    CHECK(r.outcome == StepOutcome::applied);
    CHECK(std::isfinite(r.grad_norm));
    CHECK(same(bits(*now), late->params()));
    CHECK(same(test::to_device(now->optimizer_state().second, Device::cpu()), late->optimizer_state().second));
  }
}
