// .tfmb corpora (libcore/data/corpus.h, man/tfm-batch.1 "FILE FORMAT") and
// the batcher (libcore/data/batcher.h): round trips, bucketing invariants,
// re-packing, and one tfm::Error naming the file for every kind of damage.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>

#include "libcore/data/corpus.h"
#include "libcore/error.h"
#include "libcore/io/checkpoint_format.h"

#include "tests/support.h"

using namespace tfm;
using Catch::Contains;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Seeded random pairs; pair i's first source id encodes i so that identity survives sorting.
std::vector<TokenPair> random_pairs(size_t n, int32_t max_len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> len(1, max_len), id(4, 499);
  std::vector<TokenPair> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].src.resize(size_t(len(rng)));
    out[i].tgt.resize(size_t(len(rng)));
    for (auto& x : out[i].src) x = id(rng);
    for (auto& x : out[i].tgt) x = id(rng);
  }
  return out;
}

CorpusMeta meta(int64_t max_tokens) { return {"spm-0123456789abcdef", 500, 100, max_tokens}; }

void check_batches(const Corpus& c, const std::vector<BatchRange>& batches, int64_t max_tokens) {
  std::vector<int> seen(c.size(), 0);
  for (const BatchRange& b : batches) {
    const BatchCost cost = batch_cost(c.lengths(), b);
    if (b.count > 1) {
      CHECK(cost.src <= max_tokens);
      CHECK(cost.tgt <= max_tokens);
    }
    for (uint32_t i = b.first; i < b.first + b.count; ++i) ++seen[i];
  }
  for (int s : seen) REQUIRE(s == 1);
}

void expect_error(const std::string& path, const std::string& what) {
  try {
    Corpus::read(path);
    FAIL("no error for " << what);
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Contains(path));
  }
}

}  // namespace

TEST_CASE("corpus round trip keeps every pair", "[corpus]") {
  test::TempDir dir;
  const std::string path = dir.file("a.tfmb");
  const auto pairs = random_pairs(9000, 100, 1);  // more than two blocks
  write_corpus(path, meta(2000), pairs);
  const Corpus c = Corpus::read(path);
  REQUIRE(c.size() == pairs.size());
  CHECK(c.meta().fingerprint == "spm-0123456789abcdef");
  CHECK(c.meta().vocab_size == 500);
  CHECK(c.meta().max_tokens == 2000);
  std::multiset<std::pair<std::vector<int32_t>, std::vector<int32_t>>> want, got;
  int64_t src_tokens = 0;
  for (const auto& p : pairs) want.insert({p.src, p.tgt}), src_tokens += int64_t(p.src.size());
  for (size_t i = 0; i < c.size(); ++i)
    got.insert({{c.src(i).begin(), c.src(i).end()}, {c.tgt(i).begin(), c.tgt(i).end()}});
  CHECK(want == got);
  CHECK(c.src_tokens() == src_tokens);
}

TEST_CASE("corpus batches respect max tokens and cover every pair once", "[corpus]") {
  test::TempDir dir;
  const std::string path = dir.file("b.tfmb");
  write_corpus(path, meta(1500), random_pairs(5000, 100, 2));
  const Corpus c = Corpus::read(path);
  for (size_t i = 1; i < c.size(); ++i) {
    const PairLength a = c.lengths()[i - 1], b = c.lengths()[i];
    REQUIRE((a.tgt < b.tgt || (a.tgt == b.tgt && a.src <= b.src)));
  }
  check_batches(c, c.batches(), 1500);
  SECTION("re-packing with another max tokens") {
    for (int64_t mt : {100, 777, 25000}) {
      const auto re = c.repack(mt);
      check_batches(c, re, mt);
      const PackingStats st = packing_stats(c.lengths(), re);
      CHECK(st.src_real == c.src_tokens());
      CHECK(st.tgt_real == c.tgt_tokens());
      CHECK(st.tgt_efficiency() > 0.5);
    }
    CHECK(c.repack(100).size() > c.batches().size());
    CHECK(c.repack(25000).size() < c.batches().size());
  }
}

TEST_CASE("a pair longer than max tokens forms a batch of its own", "[corpus]") {
  const std::vector<PairLength> sorted = {{1, 1}, {2, 2}, {50, 60}};
  const auto b = pack_batches(sorted, 10);
  REQUIRE(b.size() == 2);
  CHECK(b[1].first == 2);
  CHECK(b[1].count == 1);
}

TEST_CASE("corpus writer rejects pairs that break its limits", "[corpus]") {
  test::TempDir dir;
  std::vector<TokenPair> bad = {{{5}, {}}};
  CHECK_THROWS_AS(write_corpus(dir.file("x.tfmb"), meta(100), bad), Error);
  bad = {{{5}, {600}}};
  CHECK_THROWS_AS(write_corpus(dir.file("x.tfmb"), meta(100), bad), Error);
  CHECK_FALSE(std::filesystem::exists(dir.file("x.tfmb")));
}

TEST_CASE("empty corpus round trips", "[corpus]") {
  test::TempDir dir;
  write_corpus(dir.file("e.tfmb"), meta(100), {});
  const Corpus c = Corpus::read(dir.file("e.tfmb"));
  CHECK(c.size() == 0);
  CHECK(c.batches().empty());
}

TEST_CASE("every damaged corpus is one error naming the file", "[corpus]") {
  test::TempDir dir;
  const std::string good = dir.file("good.tfmb"), bad = dir.file("bad.tfmb");
  write_corpus(good, meta(800), random_pairs(5000, 40, 3));
  const std::string bytes = slurp(good);
  REQUIRE(bytes.size() > 1000);

  SECTION("truncated at many cut points") {
    for (size_t cut = 0; cut < bytes.size(); cut += (cut < 300 ? 1 : 97)) {
      spit(bad, bytes.substr(0, cut));
      expect_error(bad, "cut at " + std::to_string(cut));
    }
  }
  SECTION("a flipped byte anywhere") {
    for (size_t at = 0; at < bytes.size(); at += (at < 400 ? 1 : 61)) {
      std::string b = bytes;
      b[at] = char(b[at] ^ 0x5a);
      spit(bad, b);
      expect_error(bad, "flip at " + std::to_string(at));
    }
  }
  SECTION("wrong magic and wrong version") {
    std::string b = bytes;
    b[1] = 'X';
    spit(bad, b);
    CHECK_THROWS_WITH(Corpus::read(bad), Contains("not a tfm corpus") && Contains(bad));
    b = bytes;
    b[8] = 7;
    spit(bad, b);
    CHECK_THROWS_WITH(Corpus::read(bad), Contains("version 7") && Contains(bad));
    spit(bad, "");
    CHECK_THROWS_WITH(Corpus::read(bad), Contains("empty") && Contains(bad));
    CHECK_THROWS_WITH(Corpus::read(dir.file("missing.tfmb")), Contains("missing.tfmb"));
  }
  SECTION("huge length fields under a valid checksum") {
    using io::detail::crc32;
    auto reseal = [](std::string b) {  // recompute the header CRC over the lie
      const uint32_t crc = crc32(0, b.data(), 124);
      for (int k = 0; k < 4; ++k) b[size_t(124 + k)] = char((crc >> (8 * k)) & 0xff);
      return b;
    };
    for (size_t field : {16, 24, 32, 48, 64, 68, 72}) {
      std::string b = bytes;
      for (size_t k = 0; k < 4; ++k) b[field + k] = char(0xff);
      spit(bad, reseal(b));
      expect_error(bad, "huge field at " + std::to_string(field));
    }
    // A max tokens that the stored batches exceed.
    {
      std::string b = bytes;
      b[56] = 1;
      for (size_t k = 57; k < 64; ++k) b[k] = 0;
      spit(bad, reseal(b));
      CHECK_THROWS_WITH(Corpus::read(bad), Contains("max tokens") && Contains(bad));
    }
    // A block claiming a huge decompressed size, with both CRCs made right.
    std::string b = bytes;
    const size_t entry = 128;  // block 0's index entry
    for (size_t k = 0; k < 4; ++k) b[entry + 16 + k] = char(0xff);
    const uint32_t blocks = io::detail::get<uint32_t>(reinterpret_cast<const unsigned char*>(b.data()) + 68);
    const uint32_t batches = io::detail::get<uint32_t>(reinterpret_cast<const unsigned char*>(b.data()) + 72);
    const uint32_t tcrc = crc32(0, b.data() + 128, 32 * blocks + 8 * batches);
    for (int k = 0; k < 4; ++k) b[size_t(76 + k)] = char((tcrc >> (8 * k)) & 0xff);
    spit(bad, reseal(b));
    CHECK_THROWS_WITH(Corpus::read(bad), Contains("claims") && Contains(bad));
  }
}
