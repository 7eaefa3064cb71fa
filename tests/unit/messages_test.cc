// What reaches the user from a file stays one line and valid text (issue
// 19, item 9): printable() escapes control characters and bytes that are
// not UTF-8 for messages, json_quote() keeps JSON valid UTF-8, and
// tfm::Range refuses NaN where CLI::Range lets it through.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>

#include "libcore/app.h"
#include "libcore/error.h"
#include "libcore/json.h"

using namespace tfm;

TEST_CASE("printable escapes what could split or garble a message line", "[messages]") {
  CHECK(printable("embed.weight") == "embed.weight");
  CHECK(printable("bad\nname") == "bad\\x0aname");
  CHECK(printable(std::string("a\0b\x7f\\", 5)) == "a\\x00b\\x7f\\x5c");
  CHECK(printable("caf\xc3\xa9 \xe2\x96\x81x \xf0\x9f\x98\x80") == "caf\xc3\xa9 \xe2\x96\x81x \xf0\x9f\x98\x80");
  CHECK(printable("\xff\xfe") == "\\xff\\xfe");
  CHECK(printable("\xc3") == "\\xc3");                  // cut short
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");         // overlong
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
}

TEST_CASE("json_quote writes valid UTF-8 for any bytes", "[messages]") {
  CHECK(json_quote("spm-1a2b") == "\"spm-1a2b\"");
  CHECK(json_quote("\xe2\x96\x81") == "\"\xe2\x96\x81\"");
  CHECK(json_quote("sp\xff-\xfe\nA") == "\"sp\\u00ff-\\u00fe\\nA\"");
  CHECK(json_quote("\xf4\x90\x80\x80") == "\"\\u00f4\\u0090\\u0080\\u0080\"");  // past U+10FFFF
}

TEST_CASE("tfm::Range refuses NaN and keeps CLI::Range's bounds", "[messages]") {
  CLI::App app;
  double x = 0;
  app.add_option("--x", x)->check(tfm::Range(0.0, 1e6));
  const auto parse = [&](std::vector<std::string> args) {
    std::reverse(args.begin(), args.end());
    app.clear();
    app.parse(args);
  };
  CHECK_NOTHROW(parse({"--x", "0.6"}));
  CHECK(x == 0.6);
  CHECK_NOTHROW(parse({"--x", "1e6"}));
  for (const char* bad : {"nan", "-nan", "NaN", "inf", "-1", "1e7", "abc"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse({"--x", bad}), CLI::ValidationError);
  }
  int64_t n = 0;
  app.add_option("--n", n)->check(tfm::Range(int64_t{1}, int64_t{1} << 20));
  CHECK_NOTHROW(parse({"--n", "4"}));
  CHECK_THROWS_AS(parse({"--n", "0"}), CLI::ValidationError);
}
