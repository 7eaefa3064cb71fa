// The value tree and the text readers (libcore/io/value.h, json_read.h,
// yaml_read.h): accessors and their messages, JSON and Marian's YAML subset
// with their edge cases, and one Error with a line for every malformed input.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>

#include "libcore/base/dtype.h"
#include "libcore/io/json_read.h"
#include "libcore/io/yaml_read.h"
#include "tests/support.h"

using tfm::test::error_of;
using namespace tfm::io;

TEST_CASE("value accessors name the file and the path in their errors", "[value]") {
  const Value v = parse_json(R"({"d_model": "512", "enc": {"layers": [6, 2.5]}, "k": null})", "config.json");
  CHECK(error_of([&] { v["d_model"].as_int(); }) == "config.json: 'd_model' must be an integer, got a string");
  CHECK(error_of([&] { v["enc"]["layers"].at(1).as_int(); }) ==
        "config.json: 'enc.layers[1]' must be an integer, got a float");
  CHECK(error_of([&] { v["enc"]["heads"]; }) == "config.json: 'enc' has no key 'heads'");
  CHECK(error_of([&] { v["heads"]; }) == "config.json: no key 'heads' at the top level");
  CHECK(error_of([&] { v["enc"]["layers"].at(2); }) ==
        "config.json: 'enc.layers' has 2 elements: there is no element 2");
  CHECK(error_of([&] { v.as_string(); }) == "config.json: the top-level value must be a string, got a dict");
  CHECK(v["enc"]["layers"].at(0).as_float() == 6.0);
  CHECK(v["k"].is_null());
  CHECK(v.contains("enc"));
  CHECK_FALSE(v.contains("ENC"));
  CHECK(v["enc"]["layers"].size() == 2);
}

TEST_CASE("value objects are navigated through their state, and cycles are refused", "[value]") {
  Object o;
  o.class_name = "argparse.Namespace";
  o.state = Value::dict({{Value::string("lr"), Value::real(0.5)}});
  Value top = Value::dict({{Value::string("args"), Value::object(o)}});
  top.name_tree("ckpt.pt");
  CHECK(top["args"]["lr"].as_float() == 0.5);
  CHECK(top["args"]["lr"].path() == "args.lr");
  CHECK(error_of([&] { top["args"]["lr"].as_string(); }) == "ckpt.pt: 'args.lr' must be a string, got a float");
  CHECK(error_of([&] { top["args"]["arch"]; }) == "ckpt.pt: 'args' has no key 'arch'");

  Value loop = Value::list();
  loop.mutable_items().push_back(loop);  // shares its contents: the list holds itself
  CHECK(error_of([&] { loop.name_tree("x.pt"); }) == "x.pt: '[0]' contains itself");
  loop.mutable_items().clear();
}

TEST_CASE("value arrays convert f16 and bf16 exactly and refuse the wrong kind", "[value]") {
  Array a;
  a.type = ElementType::f16;
  a.shape = {4};
  const uint16_t halves[] = {0x3c00, 0x0001, 0xfbff, 0x8000};  // 1, the smallest subnormal, -65504, -0
  a.data.assign(reinterpret_cast<const char*>(halves), sizeof halves);
  const std::vector<float> f = a.to_f32();
  CHECK(f[0] == 1.0f);
  CHECK(f[1] == std::ldexp(1.0f, -24));
  CHECK(f[2] == -65504.0f);
  CHECK(std::signbit(f[3]));
  a.type = ElementType::bf16;
  a.shape = {1};
  const uint16_t b = 0x3fc1;  // 1.5078125
  a.data.assign(reinterpret_cast<const char*>(&b), 2);
  CHECK(a.to_f32()[0] == 1.5078125f);
  a.type = ElementType::i16;
  CHECK(a.to_i64()[0] == 0x3fc1);
  CHECK(error_of([&] { a.to_f32(); }) == "a i16 array cannot be read as floats");
  CHECK(error_of([&] { a.text(); }) == "a i16 array cannot be read as text (only i8 and u8 arrays can)");
  a.shape = {3};
  CHECK(error_of([&] { a.to_i64(); }) == "an array of shape 3 (i16) holds 2 bytes instead of 6");
}

TEST_CASE("json reads every kind of value exactly", "[json]") {
  const Value v = parse_json(
      " {\"s\": \"a\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\u2028\\ud83d\\ude00 Grüße\", \"i\": [0, -0, 9223372036854775807, "
      "-9223372036854775808, 9223372036854775808, 1.0, 1e2, 2.5E-3, 1e-400], \"t\": true, \"f\": false,"
      "\"n\": null, \"o\": {}, \"l\": [[], [[1]]]}\n",
      "x.json");
  CHECK(v["s"].as_string() == "a\"\\/\b\f\n\r\t\u00e9\u2028\U0001F600 Grüße");
  const auto& i = v["i"].items();
  CHECK(i[0].as_int() == 0);
  CHECK(i[1].as_int() == 0);
  CHECK(i[2].as_int() == INT64_MAX);
  CHECK(i[3].as_int() == INT64_MIN);
  CHECK(i[4].as_float() == 9223372036854775808.0);
  CHECK(i[4].is(Value::Kind::real));
  CHECK(i[5].is(Value::Kind::real));
  CHECK(i[6].as_float() == 100.0);
  CHECK(i[7].as_float() == 2.5e-3);
  CHECK(i[8].as_float() == 0.0);
  CHECK(v["t"].as_bool());
  CHECK_FALSE(v["f"].as_bool());
  CHECK(v["n"].is_null());
  CHECK(v["o"].as_dict().empty());
  CHECK(v["l"].at(1).at(0).at(0).as_int() == 1);
  CHECK(v.as_dict()[0].first.as_string() == "s");  // file order
}

TEST_CASE("json refuses malformed text with its line and column", "[json]") {
  const auto err = [](const std::string& text) { return error_of([&] { parse_json(text, "c.json"); }); };
  CHECK(err("{\"a\": 1,}") == "expected a string key, got '}' (c.json:1:9)");
  CHECK(err("[1,\n 2,\n]") == "expected a JSON value, got ']' (c.json:3:1)");
  CHECK(err("{\"a\": 01}") == "a number has a leading zero (c.json:1:7)");
  CHECK(err("[1.]") == "a number needs digits after its '.' (c.json:1:2)");
  CHECK(err("[-]") == "a number needs digits (c.json:1:2)");
  CHECK(err("[NaN]") == "expected a JSON value, got 'N' (c.json:1:2)");
  CHECK(err("[1e400]") == "the number 1e400 is out of range (c.json:1:2)");
  CHECK(err("\"\\ud800\"") == "a string holds a lone high surrogate (c.json:1:2)");
  CHECK(err("\"\\udc00\"") == "a string holds a lone low surrogate (c.json:1:2)");
  CHECK(err("\"a\tb\"") == "a string holds a control character (escape it) (c.json:1:3)");
  CHECK(err("\"\\x41\"") == "a string holds an unknown escape '\\x' (c.json:1:2)");
  CHECK(err("\"\xff\"") == "a string holds bytes that are not UTF-8 (c.json:1:2)");
  CHECK(err("\"abc") == "a string is not closed (c.json:1:5)");
  CHECK(err("{\"a\": 1, \"a\": 2}") == "the key 'a' is given twice (c.json:1:10)");
  CHECK(err("{} {}") == "unexpected text after the JSON value (c.json:1:4)");
  CHECK(err("") == "expected a JSON value, got the end of the text (c.json:1:1)");
  CHECK(err("{\"a\" 1}") == "expected ':' after a key, got '1' (c.json:1:6)");
  CHECK(err("[tru]") == "expected a JSON value, got 't' (c.json:1:2)");
  CHECK(err(std::string(600, '[')) == "the JSON nests deeper than 512 levels (c.json:1:514)");
  CHECK(err("{\"é\": [1 2]}") == "expected ',' or ']' in an array, got '2' (c.json:1:10)");  // characters, not bytes
}

TEST_CASE("yaml reads Marian's model.yml subset in file order", "[yaml]") {
  const Value v = parse_yaml(
      "---\n"
      "# written by Marian\n"
      "type: transformer  # a comment\n"
      "dim-vocabs:\n"
      "  - 32000\n"
      "  - 32001\n"
      "vocabs:\n"
      "- \"a b.spm\"\n"
      "- 'it''s.spm'\n"
      "-\n"
      "\n"
      "flow: [1, 2.5, \"x, y\", [a], {k: v}, []]\n"
      "empty-list: []\n"
      "empty-map: {}\n"
      "none:\n"
      "tilde: ~\n"
      "yes: true\n"
      "no: False\n"
      "hex: 0x1F\n"
      "big: 99999999999999999999\n"
      "float: 1e-08\n"
      "inf: -.inf\n"
      "version: v1.12.0 65bf82ff 2023-02-21 09:56:29 -0800\n"
      "quoted: \"a\\tb \\\" \\\\ \\x41 \\u00e9 \\U0001F600 \\N \\_\"\n"
      "hash: a#b # comment\n"
      "plain-colon: a:b\n",
      "model.yml");
  CHECK(v["type"].as_string() == "transformer");
  CHECK(v["dim-vocabs"].at(1).as_int() == 32001);
  CHECK(v["vocabs"].at(0).as_string() == "a b.spm");
  CHECK(v["vocabs"].at(1).as_string() == "it's.spm");
  CHECK(v["vocabs"].at(2).is_null());
  const Value& flow = v["flow"];
  CHECK(flow.at(0).as_int() == 1);
  CHECK(flow.at(1).as_float() == 2.5);
  CHECK(flow.at(2).as_string() == "x, y");
  CHECK(flow.at(3).at(0).as_string() == "a");
  CHECK(flow.at(4)["k"].as_string() == "v");
  CHECK(flow.at(5).size() == 0);
  CHECK(v["empty-list"].size() == 0);
  CHECK(v["empty-map"].size() == 0);
  CHECK(v["none"].is_null());
  CHECK(v["tilde"].is_null());
  CHECK(v["yes"].as_bool());
  CHECK_FALSE(v["no"].as_bool());
  CHECK(v["hex"].as_int() == 31);
  CHECK(v["big"].as_float() == 1e20);
  CHECK(v["float"].as_float() == 1e-8);
  CHECK(v["inf"].as_float() == -HUGE_VAL);
  CHECK(v["version"].as_string() == "v1.12.0 65bf82ff 2023-02-21 09:56:29 -0800");
  CHECK(v["quoted"].as_string() == "a\tb \" \\ A \u00e9 \U0001F600 \u0085 \u00a0");
  CHECK(v["hash"].as_string() == "a#b");
  CHECK(v["plain-colon"].as_string() == "a:b");
  CHECK(v.as_dict().front().first.as_string() == "type");
  CHECK(v.as_dict().back().first.as_string() == "plain-colon");
}

TEST_CASE("yaml reads Marian vocabularies: keys are strings, quoted in every way", "[yaml]") {
  const Value v = parse_yaml(
      "</s>: 0\n"
      "\"\\\"\": 1\n"
      "'''': 2\n"
      "\"\\\\\": 3\n"
      "\"\\x01\\xE9\": 4\n"
      "\"\\u2581the\": 5\n"
      "\"\\U0001F600\": 6\n"
      "true: 7\n"
      "'123': 8\n"
      "\xe2\x96\x81und: 9\n"
      "? ''\n"
      ": 10\n"
      "a:b: 11\n",
      "vocab.yml");
  const char* keys[] = {"</s>", "\"", "'", "\\", "\x01\xc3\xa9", "\xe2\x96\x81the", "\xf0\x9f\x98\x80",
                        "true", "123", "\xe2\x96\x81und", "", "a:b"};
  REQUIRE(v.size() == 12);
  for (size_t i = 0; i < 12; ++i) {
    CHECK(v.as_dict()[i].first.as_string() == keys[i]);
    CHECK(v.as_dict()[i].second.as_int() == static_cast<int64_t>(i));
  }
}

TEST_CASE("yaml refuses what is outside the subset, naming the line", "[yaml]") {
  const auto err = [](const std::string& text) { return error_of([&] { parse_yaml(text, "m.yml"); }); };
  CHECK(err("a: 1\nb:\n  c: 2\n") == "an indented line outside a list (nested mappings are outside the subset) (m.yml:3)");
  CHECK(err("a: |\n  text\n") == "a block scalar (| or >) is outside the subset (m.yml:1)");
  CHECK(err("a: &x 1\n") == "anchors, aliases and tags are outside the subset (m.yml:1)");
  CHECK(err("a: *x\n") == "anchors, aliases and tags are outside the subset (m.yml:1)");
  CHECK(err("a: !!str 1\n") == "anchors, aliases and tags are outside the subset (m.yml:1)");
  CHECK(err("a: 1\na: 2\n") == "the key 'a' is given twice (m.yml:2)");
  CHECK(err("a: \"open\n") == "a quoted string continues on the next line (outside the subset) (m.yml:1)");
  CHECK(err("a: [1,\n 2]\n") == "a flow collection continues on the next line (outside the subset) (m.yml:1)");
  CHECK(err("a:\n  - 1\n    b: 2\n") == "an indented line outside a list (nested mappings are outside the subset) (m.yml:3)");
  CHECK(err("a:\n  - 1\n - 2\n") == "a list item at another indentation than the first (m.yml:3)");
  CHECK(err("a:\n  - - 1\n") == "a list inside a list (outside the subset) (m.yml:2)");
  CHECK(err("a:\n  - k: v\n") == "a mapping inside a value (outside the subset) (m.yml:2)");
  CHECK(err("- 1\n") == "a top-level list (the subset reads one top-level mapping) (m.yml:1)");
  CHECK(err("just text\n") == "expected 'key: value' (m.yml:1)");
  CHECK(err("a: \"x\" y\n") == "unexpected text after a value: 'y' (m.yml:1)");
  CHECK(err("a: \"\\q\"\n") == "an unknown escape '\\q' in a double-quoted string (m.yml:1)");
  CHECK(err("a: \"\\xZZ\"\n") == "an escape needs 2 hex digits (m.yml:1)");
  CHECK(err("a: \"\\ud800\"\n") == "an escape names U+D800, which is not a character (m.yml:1)");
  CHECK(err("\ta: 1\n") == "a tab in the indentation (m.yml:1)");
  CHECK(err("a: 1\n? b\nc: 2\n") == "an explicit key ('?') must be followed by a line ': value' (m.yml:3)");
}
