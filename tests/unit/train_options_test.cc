// tfm-train's knobs (libcore/train/options.h): durations, the text form the
// training state and the configuration file share, and --dump-config's file
// read back by CLI11's --config to the same model and options.
#include <CLI/CLI.hpp>
#include <catch2/catch.hpp>

#include <fstream>
#include <set>

#include "libcore/base/error.h"
#include "libcore/io/key_value.h"
#include "libcore/train/options.h"
#include "tests/support.h"

using namespace tfm;
using namespace tfm::train;
using Catch::Contains;

TEST_CASE("durations parse and print as the options spell them", "[train]") {
  struct Case { const char* text; double seconds; const char* printed; };
  const Case cases[] = {{"10m", 600, "10m"},     {"1h30m", 5400, "1h30m"}, {"90", 90, "1m30s"},
                        {"0.5s", 0.5, "0.5s"},   {"2d", 172800, "2d"},     {"0", 0, "0"},
                        {"1d2h3m4s", 93784, "1d2h3m4s"}, {" 45s ", 45, "45s"}};
  for (const Case& c : cases) {
    INFO(c.text);
    CHECK(parse_duration("save-every", c.text) == c.seconds);
    CHECK(format_duration(c.seconds) == c.printed);
    CHECK(parse_duration("save-every", format_duration(c.seconds)) == c.seconds);
  }
  for (const char* bad : {"", "10x", "m", "-5", "1m1m", "5m10", "1e400", "nan"}) {
    INFO(bad);
    REQUIRE_THROWS_WITH(parse_duration("save-every", bad), Contains("save-every must be a duration"));
  }
}

TEST_CASE("training options round-trip through their text and check their values", "[train]") {
  TrainOptions t;
  t.set("lr-scale", "0.3");
  t.set("warmup", "123");
  t.set("precision", "bf16");
  t.set("save-every", "1h5m");
  t.set("seed", "18446744073709551615");
  t.set("clip-norm", "0.1");
  TrainOptions back;
  io::for_each_key_value(t.to_text(), "options", [&](std::string_view k, std::string_view v) {
    back.set(k, v);
  });
  CHECK(back == t);
  CHECK(back.lr_scale == 0.3);
  CHECK(back.seed == UINT64_MAX);
  CHECK(back.save_every == 3900);
  CHECK(back.precision == Precision::bf16);
  // Every knob is in the text, once, in table order.
  size_t lines = 0;
  io::for_each_key_value(t.to_text(), "options", [&](std::string_view k, std::string_view) {
    REQUIRE(k == train_knobs()[lines++].key);
  });
  CHECK(lines == train_knobs().size());

  REQUIRE_THROWS_WITH(t.set("lr-scale", "0"), Contains("lr-scale must be above 0"));
  REQUIRE_THROWS_WITH(t.set("warmup", "0"), Contains("warmup must be at least 1, got 0"));
  REQUIRE_THROWS_WITH(t.set("update-freq", "two"), Contains("update-freq must be an integer"));
  REQUIRE_THROWS_WITH(t.set("precision", "fp64"), Contains("fp32, tf32, bf16 or fp16"));
  REQUIRE_THROWS_WITH(t.set("seed", "-1"), Contains("seed must be a non-negative integer"));
  REQUIRE_THROWS_WITH(t.set("bogus", "1"), Contains("unknown training option 'bogus'"));
}

TEST_CASE("the model knobs are every key of the model's configuration", "[train]") {
  std::vector<std::string> keys;
  io::for_each_key_value(ModelConfig().to_text(), "config", [&](std::string_view k, std::string_view) {
    if (k != "vocab_size") keys.emplace_back(k);  // the vocabulary decides it
  });
  REQUIRE(keys.size() == model_knobs().size());
  for (size_t i = 0; i < keys.size(); ++i) {
    CHECK(model_key(model_knobs()[i].key) == keys[i]);
    CHECK(model_knobs()[i].key.find('_') == std::string::npos);
  }
}

TEST_CASE("the file --dump-config prints reads back through --config as the same run", "[train]") {
  const test::TempDir dir;
  ModelConfig model = ModelConfig::preset("big");
  model.pre_norm = true;
  model.attention_dropout = 0.05f;
  model.d_k = 48;
  TrainOptions options;
  options.set("update-freq", "8");
  options.set("max-time", "3h");
  options.set("lr-scale", "0.7");
  const std::string path = dir.file("run.ini");
  std::ofstream(path) << config_file_text(model, options);

  CLI::App app;
  app.set_config("--config");
  app.allow_config_extras(CLI::config_extras_mode::error);
  Overrides o;
  add_model_options(app, o);
  add_train_options(app, o);
  const std::string config_flag = "--config", preset_flag = "--preset", preset = "tiny";
  std::vector<const char*> argv = {"tfm-train", preset_flag.c_str(), preset.c_str(),
                                   config_flag.c_str(), path.c_str()};
  app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
  ModelConfig got = requested_model(o);
  got.vocab_size = model.vocab_size;
  CHECK(got == model);  // every knob is in the file: the preset does not show through
  TrainOptions back;
  for (const auto& [k, v] : o.train) back.set(k, v);
  CHECK(back == options);
  CHECK(o.given("update-freq"));
  CHECK_FALSE(o.given("bogus"));
}

TEST_CASE("a bad knob on the command line is a usage error naming it", "[train]") {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--d-model", "wide"}, {"--pre-norm", "maybe"}, {"--lr-scale", "-1"},
           {"--save-every", "soon"}, {"--preset", "huge"}}) {
    CLI::App app;
    Overrides o;
    add_model_options(app, o);
    add_train_options(app, o);
    std::vector<const char*> argv = {"tfm-train"};
    for (const auto& a : args) argv.push_back(a.c_str());
    INFO(args[0]);
    try {
      app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
      FAIL("no error");
    } catch (const CLI::ValidationError& e) {
      CHECK(std::string(e.what()).find(args[0]) != std::string::npos);
    }
  }
}

TEST_CASE("resuming checks the model options against the checkpoint's model", "[train]") {
  const ModelConfig have = ModelConfig::preset("base");
  Overrides same;
  same.model = {{"d_model", "512"}};
  CHECK_NOTHROW(check_model_overrides(have, same, "ck.bin"));
  Overrides other;
  other.model = {{"d_model", "256"}, {"heads", "4"}};
  REQUIRE_THROWS_WITH(check_model_overrides(have, other, "ck.bin"),
                      Contains("architecture mismatch: ck.bin") && Contains("d_model = 512 (asked: 256)") &&
                          Contains("heads = 8 (asked: 4)"));
  Overrides big;
  big.preset = "big";
  REQUIRE_THROWS_WITH(check_model_overrides(have, big, "ck.bin"), Contains("d_ff = 2048 (asked: 4096)"));
}

TEST_CASE("durations print back as they parse, past fmt's plain notation", "[train]") {
  // Found by tests/fuzz/fuzz_config: --dump-config wrote 7.777777777777778e+99s,
  // which --config could not read.
  for (const double seconds : {0.5, 90.0, 5e-05, 7.777777777777778e+99, 1e300, 36000.0}) {
    INFO(seconds);
    CHECK(tfm::train::parse_duration("t", tfm::train::format_duration(seconds)) == seconds);
  }
  CHECK_THROWS(tfm::train::parse_duration("t", "2e"));
  CHECK_THROWS(tfm::train::parse_duration("t", "infs"));
}

TEST_CASE("fine-tuning keeps every architecture key of the checkpoint's model", "[train]") {
  const ModelConfig have = ModelConfig::preset("tiny");
  // Each key of the text form in turn given another value (a number
  // halved or doubled, a flag flipped): refused naming the key and both
  // values, unless it only shapes training. New keys are covered as they come.
  int changed = 0;
  std::set<std::string> training;
  io::for_each_key_value(have.to_text(), "config", [&](std::string_view key, std::string_view value) {
    if (key == "vocab_size") return;  // the vocabulary's, not an option
    const std::string v(value);
    std::string other;
    if (v == "true" || v == "false") {
      other = v == "true" ? "false" : "true";
    } else if (v.find_first_not_of("0123456789") == std::string::npos) {
      other = std::to_string(std::stoll(v) * 2);
    } else if (v.find_first_not_of("0123456789.e-") == std::string::npos) {
      other = fmt::format("{}", std::stod(v) / 2);
    } else {
      return;  // no other value to guess (a name): a preset covers it below
    }
    INFO(key << " = " << v << " -> " << other);
    Overrides o;
    o.model = {{std::string(key), other}};
    ++changed;
    if (training_only_key(key)) {
      training.emplace(key);
      ModelConfig want = have;
      want.set(key, other);
      CHECK(fine_tuned_model(have, o, "ck.bin") == want);
    } else {
      REQUIRE_THROWS_WITH(fine_tuned_model(have, o, "ck.bin"),
                          Contains(fmt::format("architecture mismatch: ck.bin holds another model "
                                               "than the options ask for: {} = {} (asked: {})",
                                               key, v, other)));
    }
  });
  CHECK(changed >= 10);
  CHECK(training == std::set<std::string>{"dropout", "attention_dropout", "label_smoothing"});
  // The checkpoint's own values, repeated, and its preset: accepted; the
  // training knobs stay the checkpoint's unless given.
  ModelConfig tuned = have;
  tuned.dropout = 0.25f;
  Overrides same;
  same.preset = "tiny";
  same.model = {{"d_model", fmt::format("{}", have.d_model)}, {"dropout", "0.25"}};
  CHECK(fine_tuned_model(have, same, "ck.bin") == tuned);
  ModelConfig sparse = have;
  sparse.label_smoothing = 0;
  Overrides base;
  base.preset = "base";
  REQUIRE_THROWS_WITH(fine_tuned_model(sparse, base, "ck.bin"), Contains("d_model = 32 (asked: 512)"));
  Overrides none;
  CHECK(fine_tuned_model(sparse, none, "ck.bin") == sparse);
}
