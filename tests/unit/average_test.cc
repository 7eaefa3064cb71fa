// Checkpoint averaging (libcore/model/average.h): k copies come back bit for
// bit, two known checkpoints give the hand-computed mean, mismatches are one
// Error naming the file and the tensor, the state is dropped or kept, and
// --last picks the newest by training step.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "libcore/model/average.h"
#include "libcore/model/model_file.h"
#include "libcore/model/model_io.h"

#include "tests/support.h"

using namespace tfm;
using namespace tfm::io;
using Catch::Contains;
using test::error_of;

namespace {

template <typename T>
CheckpointTensor tensor_of(std::string name, Shape shape, const std::vector<T>& values) {
  CheckpointTensor t{std::move(name), dtype_of<T>, shape, {}};
  t.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

template <typename T>
std::vector<T> values_of(const CheckpointTensor& t) {
  std::vector<T> v(t.data.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

// Awkward f32 values: signed zeros, subnormals, extremes, and many random ones.
std::vector<float> awkward(size_t n, uint32_t seed) {
  std::vector<float> v = {0.0f, -0.0f, 1e-45f, -1e-45f, 1.1754942e-38f, 3.4028235e38f,
                          -3.4028235e38f, 1.0f / 3.0f, 0.1f, -7.0f,
                          std::numeric_limits<float>::infinity()};
  uint32_t x = seed;
  while (v.size() < n) {
    x = x * 1664525u + 1013904223u;
    uint32_t bits = x;
    if ((bits & 0x7f800000u) == 0x7f800000u) bits ^= 0x00800000u;  // no NaN or inf
    float f;
    std::memcpy(&f, &bits, 4);
    v.push_back(f);
  }
  return v;
}

// These files hold no model: averaging checks them as files alone.
const AverageOptions kSynthetic = [] {
  AverageOptions o;
  o.check_model = false;
  return o;
}();

Checkpoint model_like(uint32_t seed) {
  Checkpoint c;
  c.config = "layers = 2\nd_model = 8\n";
  c.tokenizer = "spm bytes";
  c.tensors.push_back(tensor_of<float>("embed", Shape{37, 29}, awkward(37 * 29, seed)));
  c.tensors.push_back(tensor_of<float>("scalar", Shape{}, {-0.0f}));
  c.tensors.push_back(tensor_of<float>("empty", Shape{0, 3}, {}));
  c.tensors.push_back(tensor_of<bf16>("half.bf16", Shape{3}, {bf16(1.5f), bf16(-0.0f), bf16(3e-3f)}));
  c.tensors.push_back(tensor_of<double>("f64", Shape{4}, {0.1, -0.0, 1e-310, 1.0 / 3.0}));
  return c;
}


}  // namespace

TEST_CASE("average: k copies of one checkpoint are that checkpoint, bit for bit", "[average]") {
  test::TempDir dir;
  const Checkpoint c = model_like(7);
  write_checkpoint(dir.file("a.bin"), c);
  for (int k : {1, 2, 3, 5, 7, 10, 13, 20, 31}) {
    INFO("k = " << k);
    const std::vector<std::string> inputs(static_cast<size_t>(k), dir.file("a.bin"));
    const AverageReport r = average_checkpoints(inputs, dir.file("avg.bin"), kSynthetic);
    CHECK(r.tensors == 5);
    CHECK(r.elements == 37 * 29 + 1 + 3 + 4);
    const Checkpoint got = read_checkpoint(dir.file("avg.bin"));
    CHECK(got.config == c.config);
    CHECK(got.tokenizer == c.tokenizer);
    REQUIRE(got.tensors.size() == c.tensors.size());
    for (size_t i = 0; i < c.tensors.size(); ++i) {
      INFO("tensor " << c.tensors[i].name);
      CHECK(got.tensors[i].shape == c.tensors[i].shape);
      CHECK(got.tensors[i].data == c.tensors[i].data);
    }
    CHECK(got.sections.empty());
  }
}

TEST_CASE("average: a model's checkpoint, averaged with itself, loads as the same model", "[average]") {
  test::TempDir dir;
  Transformer model(ModelConfig::preset("tiny"), ModelLimits{64, 16, 64}, Device::cpu());
  model.init(3);
  save_model(dir.file("m.bin"), model);
  average_checkpoints({dir.file("m.bin"), dir.file("m.bin"), dir.file("m.bin")}, dir.file("avg.bin"));
  Transformer back(ModelConfig::preset("tiny"), ModelLimits{64, 16, 64}, Device::cpu());
  ModelFile(dir.file("avg.bin")).load_parameters(back);
  for (size_t id = 0; id < model.layout().entries().size(); ++id) {
    INFO(model.layout().entries()[id].name);
    const TensorView p = model.param(static_cast<int>(id)), q = back.param(static_cast<int>(id));
    CHECK(std::memcmp(p.data(), q.data(), p.bytes()) == 0);
  }
}

TEST_CASE("average: two known checkpoints give the hand-computed mean", "[average]") {
  test::TempDir dir;
  Checkpoint a, b;
  a.config = b.config = "d_model = 4\n";
  a.tensors.push_back(tensor_of<float>("w", Shape{2, 3}, {1.0f, -0.0f, 0.1f, 3e38f, 1e-45f, -2.0f}));
  a.tensors.push_back(tensor_of<double>("d", Shape{2}, {1.0, 0.1}));
  // The other table order: averaging goes by name.
  b.tensors.push_back(tensor_of<double>("d", Shape{2}, {2.0, 0.2}));
  b.tensors.push_back(tensor_of<float>("w", Shape{2, 3}, {2.0f, -0.0f, 0.2f, 3e38f, 2e-45f, 5.0f}));
  write_checkpoint(dir.file("a.bin"), a);
  write_checkpoint(dir.file("b.bin"), b);
  average_checkpoints({dir.file("a.bin"), dir.file("b.bin")}, dir.file("avg.bin"), kSynthetic);
  const Checkpoint got = read_checkpoint(dir.file("avg.bin"));
  REQUIRE(got.tensors.size() == 2);
  CHECK(got.tensors[0].name == "w");  // the first input's order
  const std::vector<float> w = values_of<float>(got.tensors[0]);
  // (a + b) / 2 in double, rounded once; 3e38 + 3e38 overflows f32 but not the double sum.
  const std::vector<float> x = values_of<float>(a.tensors[0]), y = values_of<float>(b.tensors[1]);
  REQUIRE(w.size() == x.size());
  for (size_t i = 0; i < w.size(); ++i) {
    INFO("element " << i);
    const auto want = static_cast<float>((double{x[i]} + double{y[i]}) / 2);
    CHECK(std::memcmp(&w[i], &want, 4) == 0);
  }
  CHECK(w[0] == 1.5f);
  CHECK(std::signbit(w[1]));
  CHECK(w[3] == 3e38f);
  CHECK(w[5] == 1.5f);
  const std::vector<double> d = values_of<double>(got.tensors[1]);
  CHECK(d[0] == 1.5);
  CHECK(d[1] == 0.1 + (0.2 - 0.1) / 2);  // f64: the running mean
}

TEST_CASE("average: pieces that split elements add up as whole ones", "[average]") {
  // A tensor over the reader's 1 MiB pieces, of an odd number of f32
  // elements behind a 2-byte tensor: elements straddle the piece bounds.
  test::TempDir dir;
  Checkpoint a, b;
  a.config = b.config = "x = 1\n";
  const size_t n = (size_t{3} << 20) / 4 + 3;
  std::vector<float> x(n), y(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1001) * 0.5f, y[i] = static_cast<float>(i % 7);
  for (Checkpoint* c : {&a, &b}) c->tensors.push_back(tensor_of<bf16>("h", Shape{1}, {bf16(2.0f)}));
  a.tensors.push_back(tensor_of<float>("big", Shape{static_cast<int64_t>(n)}, x));
  b.tensors.push_back(tensor_of<float>("big", Shape{static_cast<int64_t>(n)}, y));
  write_checkpoint(dir.file("a.bin"), a);
  write_checkpoint(dir.file("b.bin"), b);
  average_checkpoints({dir.file("a.bin"), dir.file("b.bin")}, dir.file("avg.bin"), kSynthetic);
  const std::vector<float> got = values_of<float>(read_checkpoint(dir.file("avg.bin")).tensors[1]);
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i)
    bad += got[i] != static_cast<float>((double{x[i]} + double{y[i]}) / 2);
  CHECK(bad == 0);
}

TEST_CASE("average: mismatches are one Error naming the file and what differs", "[average]") {
  test::TempDir dir;
  const Checkpoint a = model_like(1);
  write_checkpoint(dir.file("a.bin"), a);
  auto refused = [&](Checkpoint other, const std::string& name) {
    write_checkpoint(dir.file(name), other);
    const std::string e =
        error_of([&] { average_checkpoints({dir.file("a.bin"), dir.file(name)}, dir.file("out.bin"), kSynthetic); });
    CHECK_FALSE(std::filesystem::exists(dir.file("out.bin")));
    return e;
  };
  Checkpoint c = model_like(2);
  c.config = "layers = 2\nd_model = 16\n";
  CHECK_THAT(refused(c, "config.bin"),
             Contains("config.bin holds another configuration than") && Contains("'d_model = 16'") &&
                 Contains("'d_model = 8'"));
  c = model_like(2);
  c.tokenizer = "other spm";
  CHECK_THAT(refused(c, "vocab.bin"), Contains("vocab.bin holds another vocabulary"));
  c = model_like(2);
  c.tensors[0] = tensor_of<float>("embed", Shape{37, 30}, awkward(37 * 30, 2));
  CHECK_THAT(refused(c, "shape.bin"),
             Contains("shape.bin: tensor 'embed' is f32 (37, 30), but f32 (37, 29) in") && Contains("a.bin"));
  c = model_like(2);
  c.tensors.erase(c.tensors.begin() + 1);
  CHECK_THAT(refused(c, "missing.bin"), Contains("missing.bin has no tensor 'scalar'"));
  c = model_like(2);
  c.tensors.push_back(tensor_of<float>("extra", Shape{1}, {1.0f}));
  CHECK_THAT(refused(c, "extra.bin"), Contains("extra.bin has a tensor 'extra'"));
  c = model_like(2);
  c.tensors[0].dtype = DType::i32;
  write_checkpoint(dir.file("ints.bin"), c);
  CHECK_THAT(error_of([&] { average_checkpoints({dir.file("ints.bin")}, dir.file("out.bin"), kSynthetic); }),
             Contains("ints.bin: tensor 'embed' holds integers"));
  // Torn and foreign files: the reader's sentences, naming the file.
  std::filesystem::copy_file(dir.file("a.bin"), dir.file("torn.bin"));
  std::filesystem::resize_file(dir.file("torn.bin"), std::filesystem::file_size(dir.file("a.bin")) - 10);
  CHECK_THAT(error_of([&] { average_checkpoints({dir.file("a.bin"), dir.file("torn.bin")}, dir.file("out.bin"), kSynthetic); }),
             Contains("torn.bin is truncated"));
  CHECK_FALSE(std::filesystem::exists(dir.file("out.bin")));
}

namespace {

// `line` ("key = value") in place of its key's line of `config`.
void set_line(std::string& config, const std::string& line) {
  const std::string key = line.substr(0, line.find(' ')) + " =";
  const size_t at = config.find(key);
  REQUIRE((at == 0 || (at != std::string::npos && config[at - 1] == '\n')));
  config.replace(at, config.find('\n', at) - at, line);
}

}  // namespace

TEST_CASE("average: every input is checked as a model checkpoint first", "[average]") {
  test::TempDir dir;
  // Checksummed files whose configuration does not describe their tensors.
  CHECK_THAT(error_of([&] { average_checkpoints({dir.file("x.bin")}, dir.file("avg.bin")); }),
             Contains("cannot read"));
  write_checkpoint(dir.file("synthetic.bin"), model_like(1));
  CHECK_THAT(error_of([&] { average_checkpoints({dir.file("synthetic.bin")}, dir.file("avg.bin")); }),
             Contains("synthetic.bin has a tensor 'embed' that its configuration's model does not have"));
  Transformer model(ModelConfig::preset("tiny"), ModelLimits{64, 16, 64}, Device::cpu());
  model.init(3);
  save_model(dir.file("m.bin"), model);
  Checkpoint c = read_checkpoint(dir.file("m.bin"));
  set_line(c.config, "vocab_size = 5");  // the embedding still has 64 rows
  write_checkpoint(dir.file("v5.bin"), c);
  CHECK_THAT(error_of([&] { average_checkpoints({dir.file("m.bin"), dir.file("v5.bin")}, dir.file("avg.bin")); }),
             Contains("v5.bin: tensor 'embed.weight' is (64, 32), but its configuration (vocab_size = 5"));
  c = read_checkpoint(dir.file("m.bin"));
  set_line(c.config, "heads = 0");
  write_checkpoint(dir.file("h0.bin"), c);
  CHECK_THAT(error_of([&] { average_checkpoints({dir.file("h0.bin")}, dir.file("avg.bin")); }),
             Contains("heads must be between 1 and 1024, got 0"));
  // A key given twice is refused, not read as its last value (issue 38).
  c = read_checkpoint(dir.file("m.bin"));
  c.config += "heads = 2\n";
  write_checkpoint(dir.file("twice.bin"), c);
  CHECK_THAT(error_of([&] { average_checkpoints({dir.file("twice.bin")}, dir.file("avg.bin")); }),
             Contains("'heads' is given twice"));
  CHECK_FALSE(std::filesystem::exists(dir.file("avg.bin")));
}

TEST_CASE("average: the training state is dropped, or kept from the newest input", "[average]") {
  test::TempDir dir;
  Checkpoint a = model_like(1), b = model_like(2);
  a.sections = {{kTrainingStateSection, "format = 1\nstep = 20\n"}, {"adam.m", std::string(5000, 'a')}};
  b.sections = {{kTrainingStateSection, "format = 1\nstep = 10\n"}, {"adam.m", "b"}};
  write_checkpoint(dir.file("a.bin"), a);
  write_checkpoint(dir.file("b.bin"), b);
  const std::vector<std::string> in = {dir.file("a.bin"), dir.file("b.bin")};  // newest first
  average_checkpoints(in, dir.file("avg.bin"), kSynthetic);
  CHECK(read_checkpoint(dir.file("avg.bin")).sections.empty());
  AverageOptions keep;
  keep.keep_state = true;
  keep.check_model = false;
  const AverageReport r = average_checkpoints(in, dir.file("avg.bin"), keep);
  CHECK(r.newest == dir.file("a.bin"));
  CHECK(r.sections == std::vector<std::string>{kTrainingStateSection, "adam.m"});
  CHECK(read_checkpoint(dir.file("avg.bin")).sections == a.sections);
  CHECK(checkpoint_step(dir.file("avg.bin")) == 20);

  write_checkpoint(dir.file("plain.bin"), model_like(3));
  CHECK_THAT(error_of([&] { average_checkpoints({dir.file("plain.bin")}, dir.file("out.bin"), keep); }),
             Contains("plain.bin, the newest input, holds no training state"));
  b.sections = {{kTrainingStateSection, "format = 1\nstep = ten\n"}};
  write_checkpoint(dir.file("bad.bin"), b);
  CHECK_THAT(error_of([&] { checkpoint_step(dir.file("bad.bin")); }),
             Contains("bad.bin: its training state has a step that is not a count"));
}

TEST_CASE("average: the newest checkpoints of a directory by training step", "[average]") {
  test::TempDir dir;
  auto put = [&](const std::string& name, int step) {
    Checkpoint c = model_like(static_cast<uint32_t>(step));
    if (step >= 0) c.sections = {{kTrainingStateSection, fmt::format("format = 1\nstep = {}\n", step)}};
    write_checkpoint(dir.file(name), c);
  };
  put("checkpoint_900.bin", 900);  // the state's step orders, not the name
  put("checkpoint_1000.bin", 1000);
  put("checkpoint_best.bin", 900);  // duplicates of numbered ones count once
  put("checkpoint_last.bin", 1000);
  put("zz-average.bin", -1);  // no step: left out
  Checkpoint old = model_like(50);  // no state: the step of the name
  write_checkpoint(dir.file("checkpoint_50.bin"), old);
  {
    std::FILE* f = std::fopen(dir.file("notes.txt").c_str(), "w");
    std::fputs("not a checkpoint\n", f);
    std::fclose(f);
  }
  CHECK(newest_checkpoints(dir.path(), 2) ==
        std::vector<std::string>{dir.file("checkpoint_900.bin"), dir.file("checkpoint_1000.bin")});
  CHECK(newest_checkpoints(dir.path(), 3).front() == dir.file("checkpoint_50.bin"));
  CHECK_THAT(error_of([&] { newest_checkpoints(dir.path(), 4); }),
             Contains("holds 3 checkpoints with a training step, fewer than the 4 asked for"));
  CHECK_THAT(error_of([&] { newest_checkpoints(dir.file("nowhere"), 1); }), Contains("is not a directory"));
}

TEST_CASE("average: checkpoints that differ in training settings alone average", "[average]") {
  // Dropout and label smoothing shape training, not the weights (issue 38):
  // runs of one model with other dropouts average, keeping the first's.
  test::TempDir dir;
  Transformer model(ModelConfig::preset("tiny"), ModelLimits{64, 16, 64}, Device::cpu());
  model.init(3);
  save_model(dir.file("a.bin"), model);
  Checkpoint c = read_checkpoint(dir.file("a.bin"));
  set_line(c.config, "dropout = 0.3");
  set_line(c.config, "label_smoothing = 0");
  write_checkpoint(dir.file("b.bin"), c);
  average_checkpoints({dir.file("a.bin"), dir.file("b.bin")}, dir.file("avg.bin"));
  CHECK(read_checkpoint(dir.file("avg.bin")).config == read_checkpoint(dir.file("a.bin")).config);
  // A setting of the weights' shape still differs.
  set_line(c.config, "max_positions = 128");
  write_checkpoint(dir.file("c.bin"), c);
  CHECK_THAT(error_of([&] {
               average_checkpoints({dir.file("a.bin"), dir.file("c.bin")}, dir.file("avg2.bin"));
             }),
             Contains("c.bin holds another configuration than"));
  CHECK_FALSE(std::filesystem::exists(dir.file("avg2.bin")));
}
