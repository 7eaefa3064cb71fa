// .tfmb corpora (libcore/data/corpus.h, man/tfm-batch.1 "FILE FORMAT") and
// the batcher (libcore/data/batcher.h): round trips, the bucket order and
// its packing efficiency, re-packing, and one tfm::Error naming the file for
// every kind of damage.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <algorithm>
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

TEST_CASE("bucket key: one key per pair of lengths, a walk of unit steps", "[corpus][order]") {
  constexpr int32_t n = 40;
  std::vector<PairLength> cells;
  for (int32_t s = 1; s <= n; ++s)
    for (int32_t t = 1; t <= n; ++t) cells.push_back({s, t});
  std::set<uint32_t> keys;
  for (const PairLength& l : cells) keys.insert(bucket_key(l));
  CHECK(keys.size() == cells.size());
  // Sorted by key, the whole n x n square is one path in which each step
  // changes one length by one: neighbours in the file have close lengths.
  std::sort(cells.begin(), cells.end(),
            [](PairLength a, PairLength b) { return bucket_key(a) < bucket_key(b); });
  for (size_t i = 1; i < cells.size(); ++i)
    REQUIRE(std::abs(cells[i].src - cells[i - 1].src) + std::abs(cells[i].tgt - cells[i - 1].tgt) == 1);
  CHECK(bucket_key({kBucketMaxLen, kBucketMaxLen}) < (1u << 22));
  CHECK(bucket_key({1, kBucketMaxLen}) != bucket_key({kBucketMaxLen, 1}));
}

TEST_CASE("bucket order is a stable sort by key", "[corpus][order]") {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> len(1, kBucketMaxLen), small(1, 6);
  std::vector<PairLength> lengths(50000);
  for (size_t i = 0; i < lengths.size(); ++i)
    lengths[i] = i % 2 ? PairLength{len(rng), len(rng)} : PairLength{small(rng), small(rng)};
  const std::vector<uint32_t> order = bucket_order(lengths);
  std::vector<uint32_t> want(lengths.size());
  for (uint32_t i = 0; i < want.size(); ++i) want[i] = i;
  std::stable_sort(want.begin(), want.end(), [&](uint32_t a, uint32_t b) {
    return bucket_key(lengths[a]) < bucket_key(lengths[b]);
  });
  CHECK(order == want);
  CHECK(bucket_order({}).empty());
}

TEST_CASE("the bucket order pads both sides little, at every budget", "[corpus][order]") {
  // Correlated lengths, as in real parallel text: target ~ 1.1 x source.
  std::mt19937 rng(6);
  std::lognormal_distribution<double> base(3.0, 0.5);
  std::normal_distribution<double> noise(0.0, 3.0);
  std::vector<PairLength> lengths(20000);
  for (PairLength& l : lengths) {
    const double s = std::clamp(base(rng), 1.0, 200.0);
    l = {int32_t(s), int32_t(std::clamp(1.1 * s + noise(rng), 1.0, 200.0))};
  }
  auto sorted_by = [&](const std::vector<uint32_t>& order) {
    std::vector<PairLength> out;
    for (uint32_t i : order) out.push_back(lengths[i]);
    return out;
  };
  const std::vector<PairLength> shells = sorted_by(bucket_order(lengths));
  std::vector<uint32_t> v1(lengths.size());  // format version 1: by target, then source
  for (uint32_t i = 0; i < v1.size(); ++i) v1[i] = i;
  std::stable_sort(v1.begin(), v1.end(), [&](uint32_t a, uint32_t b) {
    return std::tie(lengths[a].tgt, lengths[a].src) < std::tie(lengths[b].tgt, lengths[b].src);
  });
  const std::vector<PairLength> by_target = sorted_by(v1);
  for (const int64_t budget : {1024, 4096, 25000}) {
    INFO("max tokens " << budget);
    const PackingStats now = packing_stats(shells, pack_batches(shells, budget));
    const PackingStats old = packing_stats(by_target, pack_batches(by_target, budget));
    const double now_min = std::min(now.src_efficiency(), now.tgt_efficiency());
    const double old_min = std::min(old.src_efficiency(), old.tgt_efficiency());
    INFO("now " << now.src_efficiency() << " " << now.tgt_efficiency() << " " << now.batches
                << ", by target " << old.src_efficiency() << " " << old.tgt_efficiency() << " "
                << old.batches);
    CHECK(now_min > 0.8);
    CHECK(now_min > old_min);
    CHECK(now.batches <= old.batches);
  }
}

TEST_CASE("corpus batches respect max tokens and cover every pair once", "[corpus]") {
  test::TempDir dir;
  const std::string path = dir.file("b.tfmb");
  write_corpus(path, meta(1500), random_pairs(5000, 100, 2));
  const Corpus c = Corpus::read(path);
  for (size_t i = 1; i < c.size(); ++i)
    REQUIRE(bucket_key(c.lengths()[i - 1]) <= bucket_key(c.lengths()[i]));
  check_batches(c, c.batches(), 1500);
  SECTION("re-packing with another max tokens") {
    for (int64_t mt : {100, 777, 25000}) {
      const auto re = c.repack(mt);
      check_batches(c, re, mt);
      const PackingStats st = packing_stats(c.lengths(), re);
      CHECK(st.src_real == c.src_tokens());
      CHECK(st.tgt_real == c.tgt_tokens());
      CHECK(st.tgt_efficiency() > 0.5);
      CHECK(st.src_efficiency() > 0.5);
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
  SECTION("wrong magic, old and future versions") {
    std::string b = bytes;
    b[1] = 'X';
    spit(bad, b);
    CHECK_THROWS_WITH(Corpus::read(bad), Contains("not a tfm corpus") && Contains(bad));
    b = bytes;
    b[8] = 7;
    spit(bad, b);
    CHECK_THROWS_WITH(Corpus::read(bad), Contains("version 7") && Contains(bad));
    b[8] = 1;  // version 1 sorted by target length
    spit(bad, b);
    CHECK_THROWS_WITH(Corpus::read(bad), Contains("version 1") && Contains("no longer reads") &&
                                             Contains("make it again with tfm-batch") && Contains(bad));
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
