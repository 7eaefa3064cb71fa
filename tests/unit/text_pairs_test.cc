// Tokenized text -> pairs (libcore/data/text_pairs.h) with tfm-batch's
// filters: the same pairs, counts and messages whatever the threads and
// chunk sizes.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <fstream>

#include "libcore/base/error.h"
#include "libcore/data/text_pairs.h"

#include "tests/support.h"

using namespace tfm;
using Catch::Contains;

namespace {

// ids: <pad> 0, <unk> 1, <s> 2, </s> 3, then the words.
const PieceTable& table() {
  static const PieceTable t({"<pad>", "<unk>", "<s>", "</s>", "\xe2\x96\x81" "a", "\xe2\x96\x81" "b",
                             "c", "dd", "\xc3\xa9"},
                            1);
  return t;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::vector<std::vector<int32_t>> sides(const PairStore& s, bool target) {
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < s.size(); ++i) out.push_back(target ? s.tgt(i) : s.src(i));
  return out;
}

// Every combination of threads and chunk sizes gives `want`'s pairs and counts.
template <typename Read>
TextPairs same_for_all_splits(Read read) {
  TextPairs first = read(TextReadOptions{1, 8192});
  for (const int threads : {1, 2, 3})
    for (const size_t chunk : {size_t{1}, size_t{2}, size_t{5}}) {
      INFO("threads " << threads << ", chunk " << chunk);
      const TextPairs t = read(TextReadOptions{threads, chunk});
      CHECK(sides(t.pairs, false) == sides(first.pairs, false));
      CHECK(sides(t.pairs, true) == sides(first.pairs, true));
      CHECK(t.counts.kept == first.counts.kept);
      CHECK(t.counts.lines == first.counts.lines);
      CHECK(t.counts.src_unk == first.counts.src_unk);
      REQUIRE(t.invalid.size() == first.invalid.size());
      for (size_t i = 0; i < t.invalid.size(); ++i) CHECK(t.where(t.invalid[i]) == first.where(first.invalid[i]));
    }
  return first;
}

// f() throws an Error that says `what` and points at `where` (FILE:LINE).
template <typename F>
void expect_error_at(F f, const std::string& what, const std::string& where) {
  try {
    f();
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Contains(what));
    CHECK(e.where() == where);
  }
}

const std::string kA = "\xe2\x96\x81" "a", kB = "\xe2\x96\x81" "b";

}  // namespace

TEST_CASE("text pairs: ids, filters and counts", "[text_pairs]") {
  test::TempDir dir;
  const std::string src = dir.file("s"), tgt = dir.file("t");
  // 1 kept; 2 empty target; 3 too long; 4 ratio; 5 invalid source; 6 invalid
  // target; 7 kept, CRLF, double spaces and unknown pieces; 8 kept, no '\n'.
  write(src, kA + " c\n" + kA + "\n" + "c c c c c c\n" + "c c c c c\n" + "bad \xff\n" + "c\n" +
                 "  zz  " + kA + "   qq \r\n" + "\xc3\xa9 dd");
  write(tgt, kB + " dd\n" + "\n" + "c\n" + "c\n" + "c\n" + "\xe2\x96 c\n" + "c zz\r\n" + "dd");
  const TextFilter filter{5, 4.0, false};
  const TextPairs t = same_for_all_splits([&](const TextReadOptions& o) {
    return read_text_pairs(src, tgt, table(), filter, o);
  });
  const FilterCounts& n = t.counts;
  CHECK(n.lines == 8);
  CHECK(n.kept == 3);
  CHECK(n.empty == 1);
  CHECK(n.too_long == 1);
  CHECK(n.ratio == 1);
  CHECK(n.invalid_utf8 == 2);
  CHECK(n.src_unk == 2);  // zz and qq of line 7; nothing of the invalid lines
  CHECK(n.tgt_unk == 1);
  CHECK(sides(t.pairs, false) == std::vector<std::vector<int32_t>>{{4, 6}, {1, 4, 1}, {8, 7}});
  CHECK(sides(t.pairs, true) == std::vector<std::vector<int32_t>>{{5, 7}, {6, 1}, {7}});
  REQUIRE(t.invalid.size() == 2);
  CHECK(t.where(t.invalid[0]) == src + ":5");
  CHECK(t.where(t.invalid[1]) == tgt + ":6");
  CHECK(t.pairs.src_tokens() == 2 + 3 + 2);
}

TEST_CASE("text pairs: --strict stops at the first invalid line", "[text_pairs]") {
  test::TempDir dir;
  const std::string src = dir.file("s"), tgt = dir.file("t");
  std::string s, u;
  for (int i = 1; i <= 40; ++i) {
    s += i == 23 ? "c\n" : (i == 31 ? "\xff\n" : "c\n");
    u += i == 23 ? "\xe2\n" : "c\n";
  }
  write(src, s);
  write(tgt, u);
  for (const int threads : {1, 2, 3})
    for (const size_t chunk : {size_t{1}, size_t{4}, size_t{100}}) {
      expect_error_at([&] { read_text_pairs(src, tgt, table(), {250, 9, true}, {threads, chunk}); },
                      "not valid UTF-8", tgt + ":23");
    }
}

TEST_CASE("text pairs: different line counts are one error, before any other", "[text_pairs]") {
  test::TempDir dir;
  const std::string src = dir.file("src.txt"), tgt = dir.file("tgt.txt");
  std::string s;
  for (int i = 0; i < 30; ++i) s += "c\n";
  write(src, s + "\xff\n");  // 31 lines, the last invalid: the mismatch still wins
  write(tgt, s.substr(0, 2 * 12));
  for (const bool strict : {false, true})
    for (const size_t chunk : {size_t{1}, size_t{5}, size_t{8192}}) {
      CHECK_THROWS_WITH(read_text_pairs(src, tgt, table(), {250, 9, strict}, {2, chunk}),
                        Contains(src + " has 31 lines but " + tgt + " has 12"));
      CHECK_THROWS_WITH(read_text_pairs(tgt, src, table(), {250, 9, strict}, {2, chunk}),
                        Contains(tgt + " has 12 lines but " + src + " has 31"));
    }
  write(tgt, "");
  CHECK_THROWS_WITH(read_text_pairs(src, tgt, table(), {}, {}), Contains("has 0"));
  CHECK_THROWS_WITH(read_text_pairs(src, dir.file("nope"), table(), {}, {}), Contains("nope"));
  CHECK_THROWS_WITH(read_text_pairs(src, src, table(), {}, {1, 0}), Contains("chunks of 0 lines"));
}

TEST_CASE("text pairs: --tsv reads the same pairs, and a line without one TAB is an error", "[text_pairs]") {
  test::TempDir dir;
  const std::string src = dir.file("s"), tgt = dir.file("t"), tsv = dir.file("p.tsv");
  write(src, kA + " c\n\xff\nc dd\n");
  write(tgt, "dd\nc\n" + kB + "\n");
  write(tsv, kA + " c\tdd\n\xff\tc\nc dd\t" + kB + "\r\n");
  const TextPairs two = read_text_pairs(src, tgt, table(), {}, {});
  const TextPairs one = same_for_all_splits([&](const TextReadOptions& o) {
    return read_tsv_pairs(tsv, table(), {}, o);
  });
  CHECK(sides(one.pairs, false) == sides(two.pairs, false));
  CHECK(sides(one.pairs, true) == sides(two.pairs, true));
  REQUIRE(one.invalid.size() == 1);
  CHECK(one.where(one.invalid[0]) == tsv + ":2");
  for (const std::string& bad : {std::string("c\tc\tc\n"), std::string("c c\n")}) {
    write(tsv, "c\tc\nc\tc\n" + bad + "\xff\tc\n");
    expect_error_at([&] { read_tsv_pairs(tsv, table(), {250, 9, true}, {2, 1}); },
                    "exactly one TAB", tsv + ":3");
  }
}

TEST_CASE("text pairs: gzip input and 4-byte ids", "[text_pairs]") {
  test::TempDir dir;
  const std::string src = dir.file("s.gz"), tgt = dir.file("t");
  gzFile f = gzopen(src.c_str(), "wb");
  gzputs(f, (kA + " dd\nc\n").c_str());
  gzclose(f);
  write(tgt, "c\nc " + kB + "\n");
  std::vector<std::string_view> many = {"<pad>", "<unk>"};
  std::vector<std::string> words;
  for (int i = 0; i < 70000; ++i) words.push_back(fmt::format("w{}", i));
  for (const std::string& w : words) many.push_back(w);
  many.push_back("c");  // id 70002
  const PieceTable wide(many, 1);
  const TextPairs t = read_text_pairs(src, tgt, wide, {}, {});
  CHECK(t.pairs.id_bytes() == 4);
  CHECK(sides(t.pairs, false) == std::vector<std::vector<int32_t>>{{1, 1}, {70002}});
  CHECK(sides(t.pairs, true) == std::vector<std::vector<int32_t>>{{70002}, {70002, 1}});
}
