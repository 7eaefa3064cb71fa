// What reaches the user from a file stays one line and valid text (issue
// 19, item 9): printable() escapes control characters and bytes that are
// not UTF-8 for messages, json_quote() keeps JSON valid UTF-8, and
// tfm::Range refuses NaN where CLI::Range lets it through.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <vector>

#include "libcore/app/app.h"
#include "libcore/base/error.h"
#include "libcore/base/json.h"
#include "libcore/base/range.h"
#include "libcore/data/token_line.h"

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

// Issue 38: one rule for every numeric option's range, in words a user reads
// ("--last must be at least 1, got 0"), never CLI11's "Value 0 not in range
// 0.000000 to 1797...".
TEST_CASE("a range is said as a rule, its unbounded side left out", "[messages]") {
  CHECK(out_of_range(int64_t{1}, std::numeric_limits<int64_t>::max(), int64_t{0}, "0") ==
        "must be at least 1, got 0");
  CHECK(out_of_range(1, 19, 20, "20") == "must be between 1 and 19, got 20");
  CHECK(out_of_range(0.0, 1e6, -1.0, "-1") == "must be between 0 and 1000000, got -1");
  CHECK(out_of_range(0.0, 1e300, -0.5, "-0.5") == "must be at least 0, got -0.5");
  CHECK(out_of_range(0.0, 1e300, 2e300, "2e300") == "must be at most 1e+300, got 2e300");
  CHECK(out_of_range(0.0, 1.0, std::nan(""), "nan") == "must be between 0 and 1, got nan");
  CHECK(range_text(1, 19) == "1 to 19");
  CHECK(range_text(int64_t{1}, std::numeric_limits<int64_t>::max()) == ">= 1");

  CLI::App app;
  int64_t last = 0;
  int threads = 0;
  double alpha = 0;
  app.add_option("--last", last)->check(tfm::AtLeast(int64_t{1}));
  app.add_option("--threads", threads)->check(tfm::AtLeast(0));
  app.add_option("--alpha", alpha)->check(tfm::Range(0.0, 1e6));
  const auto message = [&](std::vector<std::string> args) -> std::string {
    std::reverse(args.begin(), args.end());
    app.clear();
    try {
      app.parse(args);
    } catch (const CLI::ValidationError& e) {
      return e.what();
    }
    return "no error";
  };
  CHECK(message({"--last", "0"}) == "--last: must be at least 1, got 0");
  CHECK(message({"--threads", "-1"}) == "--threads: must be at least 0, got -1");
  CHECK(message({"--threads", "two"}) == "--threads: must be a whole number, got 'two'");
  CHECK(message({"--alpha", "nan"}) == "--alpha: must be between 0 and 1000000, got nan");
  CHECK(message({"--last", "3"}) == "no error");
  CHECK(last == 3);
}

// One parser of token lines for every program (issue 39): the same fields
// and the same messages whoever reads the line.
TEST_CASE("a token line splits on runs of spaces and tabs, and a bad id is said one way", "[messages]") {
  CHECK(token_fields("  3 \t14\r 15  ") == std::vector<std::string_view>{"3", "14", "15"});
  CHECK(token_fields(" \t ").empty());
  CHECK(parse_token_line("3 14  15", nullptr, 16) == std::vector<int32_t>{3, 14, 15});
  CHECK_THROWS_WITH(parse_token_line("3 x4", nullptr, 16), "'x4' is not a token id (--ids)");
  CHECK_THROWS_WITH(parse_token_line("3 -1", nullptr, 16), "token id -1 is outside the model's vocabulary [0, 16)");
  CHECK_THROWS_WITH(parse_token_line("16", nullptr, 16), "token id 16 is outside the model's vocabulary [0, 16)");
  CHECK_THROWS_WITH(parse_token_id("99999999999999999999", 16), "'99999999999999999999' is not a token id (--ids)");
}
