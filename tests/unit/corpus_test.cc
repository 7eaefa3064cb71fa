// .tfmb corpora (libcore/data/corpus.h, man/tfm-batch.1 "FILE FORMAT"), the
// flat pair store (pair_store.h) and the batcher (batcher.h): round trips,
// the bucket order and its packing efficiency, re-packing, and one
// tfm::Error naming the file for every kind of damage.
#include <catch2/catch.hpp>

#include <zstd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>

#include "libcore/base/error.h"
#include "libcore/data/corpus.h"
#include "libcore/io/checkpoint_format.h"

#include "tests/support.h"

using namespace tfm;
using Catch::Contains;
using io::detail::crc32;
using io::detail::get;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

struct Pair {
  std::vector<int32_t> src, tgt;
  bool operator<(const Pair& o) const { return std::tie(src, tgt) < std::tie(o.src, o.tgt); }
  bool operator==(const Pair& o) const = default;
};

// Seeded random pairs with ids in 4..vocab-1.
std::vector<Pair> random_pairs(size_t n, int32_t max_len, uint32_t seed, int32_t vocab = 500) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> len(1, max_len), id(4, vocab - 1);
  std::vector<Pair> out(n);
  for (Pair& p : out) {
    p.src.resize(size_t(len(rng)));
    p.tgt.resize(size_t(len(rng)));
    for (auto& x : p.src) x = id(rng);
    for (auto& x : p.tgt) x = id(rng);
  }
  return out;
}

PairStore store(const std::vector<Pair>& pairs, int64_t vocab = 500) {
  PairStore s(vocab);
  for (const Pair& p : pairs) s.add(p.src, p.tgt);
  return s;
}

CorpusMeta meta(int64_t max_tokens, int64_t vocab = 500) {
  return {"spm-0123456789abcdef", vocab, 100, max_tokens};
}

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

// Little-endian stores into a byte string.
template <typename T>
void set(std::string& b, size_t at, T v) {
  for (size_t k = 0; k < sizeof(T); ++k) b[at + k] = char((uint64_t(v) >> (8 * k)) & 0xff);
}
const unsigned char* bytes_of(const std::string& b) {
  return reinterpret_cast<const unsigned char*>(b.data());
}
// Recomputes the header CRC over whatever the header now says.
std::string reseal(std::string b) {
  set<uint32_t>(b, 124, crc32(0, b.data(), 124));
  return b;
}

// Rewrites block 0 of a .tfmb through `edit` (on its decompressed bytes)
// and makes every checksum, size and offset right again: a file that lies
// only where `edit` made it lie.
template <typename Edit>
std::string forge_block0(const std::string& file, Edit edit) {
  const auto* p = bytes_of(file);
  const uint32_t blocks = get<uint32_t>(p + 68), batches = get<uint32_t>(p + 72);
  const size_t entry = 128;
  const uint64_t offset = get<uint64_t>(p + entry), stored = get<uint64_t>(p + entry + 8);
  std::string raw(get<uint32_t>(p + entry + 16), '\0');
  REQUIRE(ZSTD_decompress(raw.data(), raw.size(), p + offset, stored) == raw.size());
  edit(raw);
  std::string z(ZSTD_compressBound(raw.size()), '\0');
  z.resize(ZSTD_compress(z.data(), z.size(), raw.data(), raw.size(), 1));
  std::string out = file.substr(0, offset) + z + file.substr(offset + stored);
  const int64_t shift = int64_t(z.size()) - int64_t(stored);
  set<uint64_t>(out, entry + 8, z.size());
  set<uint32_t>(out, entry + 16, uint32_t(raw.size()));
  set<uint32_t>(out, entry + 24, crc32(0, z.data(), z.size()));
  set<uint32_t>(out, entry + 28, crc32(0, raw.data(), raw.size()));
  for (uint32_t b = 1; b < blocks; ++b)
    set<uint64_t>(out, entry + 32 * b, get<uint64_t>(bytes_of(out) + entry + 32 * b) + shift);
  set<uint64_t>(out, 16, out.size());
  set<uint32_t>(out, 76, crc32(0, out.data() + 128, 32 * blocks + 8 * batches));
  return reseal(out);
}

}  // namespace

TEST_CASE("pair store keeps ids flat, 2 or 4 bytes wide", "[corpus]") {
  for (const int64_t vocab : {500, 65536, 65537, 100000}) {
    const auto pairs = random_pairs(300, 50, 7, int32_t(vocab));
    const PairStore s = store(pairs, vocab);
    CHECK(s.id_bytes() == (vocab <= 65536 ? 2 : 4));
    REQUIRE(s.size() == pairs.size());
    for (size_t i = 0; i < pairs.size(); ++i) {
      REQUIRE(s.src(i) == pairs[i].src);
      REQUIRE(s.tgt(i) == pairs[i].tgt);
    }
  }
}

TEST_CASE("corpus round trip keeps every pair", "[corpus]") {
  test::TempDir dir;
  const std::string path = dir.file("a.tfmb");
  for (const int64_t vocab : {500, 70000}) {  // 2-byte and 4-byte ids
    const auto pairs = random_pairs(9000, 100, 1, int32_t(vocab));  // more than two blocks
    const CorpusSummary w = write_corpus(path, meta(2000, vocab), store(pairs, vocab), {2});
    const Corpus c = Corpus::read(path);
    REQUIRE(c.size() == pairs.size());
    CHECK(w.bytes == std::filesystem::file_size(path));
    CHECK(c.version() == kCorpusVersion);
    CHECK(c.meta().fingerprint == "spm-0123456789abcdef");
    CHECK(c.meta().vocab_size == vocab);
    CHECK(c.meta().max_tokens == 2000);
    std::multiset<Pair> want(pairs.begin(), pairs.end()), got;
    int64_t src_tokens = 0;
    for (const auto& p : pairs) src_tokens += int64_t(p.src.size());
    for (size_t i = 0; i < c.size(); ++i)
      got.insert({{c.src(i).begin(), c.src(i).end()}, {c.tgt(i).begin(), c.tgt(i).end()}});
    CHECK(want == got);
    CHECK(c.src_tokens() == src_tokens);
    const PackingStats st = packing_stats(c.lengths(), c.batches());
    CHECK(w.packing.batches == st.batches);
    CHECK(w.packing.src_padded == st.src_padded);
    CHECK(w.packing.tgt_padded == st.tgt_padded);
  }
}

TEST_CASE("the file does not depend on the number of threads", "[corpus]") {
  test::TempDir dir;
  const PairStore s = store(random_pairs(20000, 60, 4));
  write_corpus(dir.file("1.tfmb"), meta(3000), s, {1});
  write_corpus(dir.file("3.tfmb"), meta(3000), s, {3});
  CHECK(slurp(dir.file("1.tfmb")) == slurp(dir.file("3.tfmb")));
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
  write_corpus(path, meta(1500), store(random_pairs(5000, 100, 2)));
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
  const std::string x = dir.file("x.tfmb");
  CHECK_THROWS_WITH(write_corpus(x, meta(100), store({{{5}, {}}})), Contains("pair 0") && Contains("outside 1..100"));
  CHECK_THROWS_WITH(write_corpus(x, meta(100), store({{{5}, {7}}, {{5}, {600}}})),
                    Contains("pair 1 holds id 600"));
  CHECK_THROWS_WITH(write_corpus(x, meta(100), store({{std::vector<int32_t>(101, 5), {7}}})),
                    Contains("101 tokens"));
  CHECK_THROWS_WITH(write_corpus(x, meta(100, 600), store({{{5}, {7}}}, 500)),
                    Contains("vocabulary of 500, not 600"));
  CorpusMeta long_fp = meta(100);
  long_fp.fingerprint = std::string(44, 'x');
  CHECK_THROWS_WITH(write_corpus(x, long_fp, store({{{5}, {7}}})), Contains("fingerprint"));
  CHECK_FALSE(std::filesystem::exists(x));
  CHECK(dir.entries() == 0);  // no temporary file left behind
}

TEST_CASE("empty corpus round trips", "[corpus]") {
  test::TempDir dir;
  write_corpus(dir.file("e.tfmb"), meta(100), PairStore(500));
  const Corpus c = Corpus::read(dir.file("e.tfmb"));
  CHECK(c.size() == 0);
  CHECK(c.batches().empty());
}

TEST_CASE("every damaged corpus is one error naming the file", "[corpus]") {
  test::TempDir dir;
  const std::string good = dir.file("good.tfmb"), bad = dir.file("bad.tfmb");
  write_corpus(good, meta(800), store(random_pairs(5000, 40, 3)));
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
    b[8] = 1;  // version 1 sorted by target length and stored 4-byte ids
    spit(bad, b);
    CHECK_THROWS_WITH(Corpus::read(bad), Contains("version 1") && Contains("no longer reads") &&
                                             Contains("make it again with tfm-batch") && Contains(bad));
    spit(bad, "");
    CHECK_THROWS_WITH(Corpus::read(bad), Contains("empty") && Contains(bad));
    CHECK_THROWS_WITH(Corpus::read(dir.file("missing.tfmb")), Contains("missing.tfmb"));
  }
  SECTION("lying header fields under a valid checksum") {
    for (size_t field : {12, 16, 24, 32, 48, 64, 68, 72}) {
      std::string b = bytes;
      for (size_t k = 0; k < 4; ++k) b[field + k] = char(0xff);
      spit(bad, reseal(b));
      expect_error(bad, "huge field at " + std::to_string(field));
    }
    {  // 4-byte ids for a vocabulary that takes 2
      std::string b = bytes;
      set<uint32_t>(b, 12, 4);
      spit(bad, reseal(b));
      CHECK_THROWS_WITH(Corpus::read(bad), Contains("4 bytes wide") && Contains(bad));
    }
    {  // a max tokens that the stored batches exceed
      std::string b = bytes;
      set<uint64_t>(b, 56, 1);
      spit(bad, reseal(b));
      CHECK_THROWS_WITH(Corpus::read(bad), Contains("max tokens") && Contains(bad));
    }
    // A block claiming a huge decompressed size, with both CRCs made right.
    std::string b = bytes;
    set<uint32_t>(b, 128 + 16, 0xffffffffu);
    const uint32_t blocks = get<uint32_t>(bytes_of(b) + 68), batches = get<uint32_t>(bytes_of(b) + 72);
    set<uint32_t>(b, 76, crc32(0, b.data() + 128, 32 * blocks + 8 * batches));
    spit(bad, reseal(b));
    CHECK_THROWS_WITH(Corpus::read(bad), Contains("claims") && Contains(bad));
  }
  SECTION("lying blocks under valid checksums") {
    // Sanity: forging with no edit gives a file the reader takes.
    spit(bad, forge_block0(bytes, [](std::string&) {}));
    CHECK(Corpus::read(bad).size() == 5000);
    auto src_len = [](const std::string& raw, size_t k) { return get<uint16_t>(bytes_of(raw) + 4 * k); };
    // Two pairs swapped, lengths and ids: out of bucket order.
    spit(bad, forge_block0(bytes, [&](std::string& raw) {
      const size_t n = 4096, a = 0, z = n - 1;
      REQUIRE(src_len(raw, a) != src_len(raw, z));
      std::vector<std::string> ids(n);
      size_t at = 4 * n;
      for (size_t k = 0; k < n; ++k) {
        const size_t len = size_t(get<uint16_t>(bytes_of(raw) + 4 * k) + get<uint16_t>(bytes_of(raw) + 4 * k + 2));
        ids[k] = raw.substr(at, 2 * len);
        at += 2 * len;
      }
      std::swap(ids[a], ids[z]);
      std::string lens = raw.substr(0, 4 * n);
      std::swap_ranges(lens.begin() + 4 * a, lens.begin() + 4 * a + 4, lens.begin() + 4 * z);
      raw = lens;
      for (const std::string& s : ids) raw += s;
    }));
    CHECK_THROWS_WITH(Corpus::read(bad), Contains("out of bucket order") && Contains(bad));
    // An id past the vocabulary.
    spit(bad, forge_block0(bytes, [](std::string& raw) { set<uint16_t>(raw, 4 * 4096, 500); }));
    CHECK_THROWS_WITH(Corpus::read(bad), Contains("id 500") && Contains(bad));
    // A length of zero, and one past max length.
    spit(bad, forge_block0(bytes, [](std::string& raw) { set<uint16_t>(raw, 0, 0); }));
    CHECK_THROWS_WITH(Corpus::read(bad), Contains("outside 1..100") && Contains(bad));
    spit(bad, forge_block0(bytes, [](std::string& raw) { set<uint16_t>(raw, 2, 101); }));
    CHECK_THROWS_WITH(Corpus::read(bad), Contains("outside 1..100") && Contains(bad));
    // Raw bytes that do not match the lengths.
    spit(bad, forge_block0(bytes, [](std::string& raw) { raw += "xy"; }));
    CHECK_THROWS_WITH(Corpus::read(bad), Contains("lengths need") && Contains(bad));
    spit(bad, forge_block0(bytes, [](std::string& raw) { raw.resize(10); }));
    CHECK_THROWS_WITH(Corpus::read(bad), Contains("too short") && Contains(bad));
  }
}
