// The training state in checkpoints (libcore/train/state.h) and the
// checkpoint directory (libcore/train/checkpoint_dir.h): round trips that
// lose nothing, and a clear error for what cannot be resumed.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "libcore/base/error.h"
#include "libcore/io/checkpoint.h"
#include "libcore/model/model_file.h"
#include "libcore/model/model_io.h"
#include "libcore/train/checkpoint_dir.h"
#include "libcore/train/state.h"
#include "tests/support.h"

using namespace tfm;
using namespace tfm::train;
using Catch::Contains;

namespace {

TrainState sample_state() {
  TrainState s;
  s.step = 1234;
  s.micro_batches = 2470;
  s.epoch = 7;
  s.cursor = 3;
  s.loss_scale = 8192;
  s.loss_scale_streak = 17;
  s.elapsed = 0.1 + 0.2;  // a double that only round-trips if printed exactly
  s.tokens = 98765432;
  s.bad_steps = 2;
  s.consecutive_bad = 1;
  s.overflow_steps = 5;
  s.best_dev_nll = std::log(7.0);
  s.best_step = 1000;
  s.stale_validations = 2;
  s.corpus = {"spm-0123456789abcdef", 29000, 377534, 361284, "00ff00ff00ff00ff"};
  s.batches = 27;
  s.options.set("update-freq", "2");
  s.options.set("lr-scale", "0.3");
  s.options.set("precision", "fp16");
  return s;
}

bool same_bytes(const TensorView& a, const TensorView& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

}  // namespace

TEST_CASE("the training state round-trips through its text exactly", "[train]") {
  const TrainState s = sample_state();
  CHECK(TrainState::parse(s.to_text(), "state") == s);
  TrainState none = s;
  none.best_dev_nll.reset();
  CHECK(TrainState::parse(none.to_text(), "state") == none);

  std::string newer = s.to_text();
  newer.replace(newer.find("format = 1"), 10, "format = 2");
  REQUIRE_THROWS_WITH(TrainState::parse(newer, "x"), Contains("training state format 2"));
  REQUIRE_THROWS_WITH(TrainState::parse("step = 3\n", "x"), Contains("no format line"));
  REQUIRE_THROWS_WITH(TrainState::parse("format = 1\nwhatever = 3\n", "x"),
                      Contains("unknown training option 'whatever'"));
  try {
    TrainState::parse("format = 1\nstep = -4\n", "ck.bin");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "step must be at least 0, got -4");
    CHECK(e.where() == "ck.bin:2");
  }
  // A key given twice is refused, not read as its last value (issue 38).
  try {
    TrainState::parse(s.to_text() + "step = 9\n", "ck.bin");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "'step' is given twice (first on line 2)");
  }
}

TEST_CASE("a training checkpoint restores parameters and Adam's moments bit for bit", "[train]") {
  const test::TempDir dir;
  const std::string path = dir.file("ck.bin");
  ModelConfig c = ModelConfig::preset("tiny");
  ModelLimits limits;
  limits.max_tokens = 32;
  limits.max_len = 8;
  Transformer a(c, limits, Device::cpu());
  a.init(5);
  const auto [am, av] = a.optimizer_state();
  copy(am, test::random(am.shape(), DType::f32, 6));
  copy(av, test::random(av.shape(), DType::f32, 7, 0.0f, 1.0f));
  const TrainState s = sample_state();
  save_checkpoint(path, a, "", s);  // an embedded tokenizer must be a real one (model_check.h)

  CHECK(read_state(io::CheckpointReader(path)) == s);
  Transformer b(c, limits, Device::cpu());
  load_checkpoint(ModelFile(path), b);
  const auto [bm, bv] = b.optimizer_state();
  CHECK(same_bytes(a.params(), b.params()));
  // Every tensor's moments come back; the gaps between them (zero in a run:
  // no gradient reaches them) are not stored and read back as zeros.
  const ParamLayout& layout = a.layout();
  for (size_t id = 0; id < layout.entries().size(); ++id) {
    INFO(layout.entries()[id].name);
    CHECK(same_bytes(layout.view(am, static_cast<int>(id)), layout.view(bm, static_cast<int>(id))));
    CHECK(same_bytes(layout.view(av, static_cast<int>(id)), layout.view(bv, static_cast<int>(id))));
  }
  CHECK(io::read_checkpoint_tokenizer(path).empty());
  // The same file still loads as a plain model (tfm-decode's view of it).
  CHECK(ModelFile(path).load_model(limits, Device::cpu())->config() == c);

  // A model written without training state cannot be resumed.
  save_model(dir.file("model.bin"), a, "");
  REQUIRE_THROWS_WITH(read_state(io::CheckpointReader(dir.file("model.bin"))), Contains("holds no training state"));
  // Moments of another model are refused.
  ModelConfig other = c;
  other.d_ff = 48;
  Transformer wrong(other, limits, Device::cpu());
  REQUIRE_THROWS_WITH(load_checkpoint(ModelFile(path), wrong), Contains("another configuration"));
}

TEST_CASE("the checkpoint directory keeps the newest and copies the last", "[train]") {
  const test::TempDir tmp;
  const CheckpointDir dir(tmp.file("run/sub"));  // created with its parents
  CHECK_FALSE(dir.has_last());
  for (int64_t step : {10, 20, 30, 40}) {
    std::FILE* f = std::fopen(dir.last().c_str(), "w");  // the last is written first
    REQUIRE(f);
    std::fprintf(f, "%lld", static_cast<long long>(step));
    std::fclose(f);
    dir.commit(step, 2);
  }
  namespace fs = std::filesystem;
  CHECK_FALSE(fs::exists(dir.numbered(10)));
  CHECK_FALSE(fs::exists(dir.numbered(20)));
  CHECK(fs::exists(dir.numbered(30)));
  CHECK(fs::exists(dir.numbered(40)));
  CHECK(dir.has_last());
  // A copy, not a link: writing over the last leaves the numbered one.
  CHECK_FALSE(fs::equivalent(dir.last(), dir.numbered(40)));
  std::FILE* f = std::fopen(dir.last().c_str(), "w");
  std::fputs("rolled back", f);
  std::fclose(f);
  CHECK(fs::file_size(dir.numbered(40)) == 2);
  CHECK(CheckpointDir::resume_path(tmp.file("run/sub")) == dir.last());
  CHECK(CheckpointDir::resume_path(dir.numbered(30)) == dir.numbered(30));
  REQUIRE_THROWS_WITH(CheckpointDir::resume_path(tmp.file("run")), Contains("no checkpoint_last.bin"));
  REQUIRE_THROWS_WITH(CheckpointDir::resume_path(tmp.file("nope.bin")), Contains("no such file"));
}

TEST_CASE("a run directory has one writer, and its dead writers' temporaries go", "[train]") {
  namespace fs = std::filesystem;
  const test::TempDir tmp;
  // A temporary file of a process that is gone (pid 0x3ffffff0 is never
  // running here), and one of this process, which stays.
  const std::string dead = tmp.file("run/checkpoint_7.bin.tmp.1073741808.0");
  const std::string mine = tmp.file("run/checkpoint_8.bin.tmp." + std::to_string(::getpid()) + ".0");
  fs::create_directories(tmp.file("run"));
  for (const std::string& f : {dead, mine}) std::fclose(std::fopen(f.c_str(), "w"));
  {
    const CheckpointDir dir(tmp.file("run"));
    CHECK_FALSE(fs::exists(dead));
    CHECK(fs::exists(mine));
    CHECK_FALSE(dir.holds_run());
    // flock(2) locks are per open file: a second CheckpointDir of this
    // process is refused as another process would be.
    REQUIRE_THROWS_WITH(CheckpointDir(tmp.file("run/")),
                        Contains("is in use: another process (pid " + std::to_string(::getpid()) + ")"));
  }
  const CheckpointDir again(tmp.file("run"));  // released with the first
  CHECK(again.newest().step == -1);
}
