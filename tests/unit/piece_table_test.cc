// The piece -> id table of tfm-batch (libcore/data/piece_table.h) against a
// std::unordered_map, its hash on strings that differ in one byte, and the
// UTF-8 check (its 8-byte ASCII path and every kind of invalid sequence).
#include <catch2/catch.hpp>

#include <random>
#include <set>
#include <string>
#include <unordered_map>

#include "libcore/data/piece_table.h"

using namespace tfm;

namespace {

// Random byte strings of 1..max_len bytes (any bytes but ' ').
std::vector<std::string> random_strings(size_t n, size_t max_len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> len(1, max_len);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::string> out(n);
  for (std::string& s : out) {
    s.resize(len(rng));
    for (char& c : s) c = char(byte(rng) == ' ' ? 'x' : byte(rng));
  }
  return out;
}

}  // namespace

TEST_CASE("piece table finds what a hash map finds", "[piece_table]") {
  // Every length from 1 to 40 (the 1-3, 4-7, 8-16 and >16 byte paths),
  // many of them sharing prefixes and suffixes.
  std::vector<std::string> owned = random_strings(20000, 40, 1);
  for (int i = 0; i < 500; ++i) {
    owned.push_back("\xe2\x96\x81piece" + std::to_string(i));
    owned.push_back(std::string(size_t(i % 37 + 1), 'a') + "b");
  }
  std::vector<std::string_view> pieces(owned.begin(), owned.end());
  std::unordered_map<std::string_view, int32_t> want;
  for (size_t i = 0; i < pieces.size(); ++i) want.emplace(pieces[i], int32_t(i));  // first wins
  const PieceTable table(pieces, 1);
  CHECK(table.size() == pieces.size());
  CHECK(table.unk_id() == 1);
  for (const auto& [piece, id] : want) REQUIRE(table.find(piece) == id);
  for (size_t i = 0; i < pieces.size(); ++i) REQUIRE(table.piece(int32_t(i)) == pieces[i]);
  // Strings the table does not hold: fresh random ones, and held pieces
  // with one byte changed, one added, one removed.
  std::vector<std::string> probes = random_strings(20000, 40, 2);
  for (size_t i = 0; i < 3000; ++i) {
    std::string s(pieces[i]);
    s[s.size() / 2] = char(s[s.size() / 2] ^ 1);
    probes.push_back(s);
    probes.push_back(std::string(pieces[i]) + "z");
    if (pieces[i].size() > 1) probes.emplace_back(pieces[i].substr(1));
  }
  for (const std::string& s : probes) {
    const auto it = want.find(s);
    REQUIRE(table.find(s) == (it == want.end() ? -1 : it->second));
  }
  // find_many agrees with find, across group boundaries.
  std::vector<std::string_view> batch(probes.begin(), probes.begin() + 1000);
  batch.insert(batch.end(), pieces.begin(), pieces.begin() + 1000);
  std::vector<int32_t> ids(batch.size());
  table.find_many(batch.data(), batch.size(), ids.data());
  for (size_t i = 0; i < batch.size(); ++i) REQUIRE(ids[i] == table.find(batch[i]));
}

TEST_CASE("piece table: duplicates keep their first id, empty tables find nothing", "[piece_table]") {
  const PieceTable t({"a", "bb", "a", "bb", "ccc"}, 0);
  CHECK(t.find("a") == 0);
  CHECK(t.find("bb") == 1);
  CHECK(t.find("ccc") == 4);
  CHECK(t.find("") == -1);
  CHECK(t.find("b") == -1);
  const PieceTable empty({}, 0);
  CHECK(empty.size() == 0);
  CHECK(empty.find("a") == -1);
  CHECK(t.all_valid_utf8());
  CHECK_FALSE(PieceTable({"ok", "\xff"}, 0).all_valid_utf8());
}

TEST_CASE("piece hash: equal bytes hash equal, one changed byte changes it", "[piece_table]") {
  std::set<uint64_t> seen;
  size_t n = 0;
  for (size_t len = 0; len <= 48; ++len) {
    std::string base(len, 'q');
    CHECK(piece_hash(base) == piece_hash(std::string(len, 'q')));
    seen.insert(piece_hash(base));
    ++n;
    for (size_t at = 0; at < len; ++at)
      for (const char c : {'r', '\0', '\xff'}) {
        std::string s = base;
        s[at] = c;
        seen.insert(piece_hash(s));
        ++n;
      }
  }
  CHECK(seen.size() == n);  // no collision among these
}

TEST_CASE("valid_utf8 accepts UTF-8 and rejects everything else", "[piece_table]") {
  const std::vector<std::string> good = {
      "", "plain ascii text of more than eight bytes", "\xe2\x96\x81" "ein", "caf\xc3\xa9",
      "\xf0\x9f\x98\x80 emoji", "\xed\x9f\xbf", "\xf4\x8f\xbf\xbf", std::string("nul\0byte", 8)};
  const std::vector<std::string> bad = {
      "\xff", "\x80", "abc\xc3", "\xc0\xaf", "\xe0\x80\xaf", "\xf0\x80\x80\xaf",  // overlong
      "\xed\xa0\x80", "\xed\xbf\xbf",                                              // surrogates
      "\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80", "\xc3\x28", "\xe2\x96"};
  for (const std::string& s : good) CHECK(valid_utf8(s));
  for (const std::string& s : bad) {
    CHECK_FALSE(valid_utf8(s));
    // ... also after and between runs of ASCII that take the 8-byte path.
    CHECK_FALSE(valid_utf8("0123456789abcdef" + s));
    CHECK_FALSE(valid_utf8("0123456789abcdef" + s + "0123456789abcdef"));
    CHECK_FALSE(valid_utf8("0123456" + s + "0123456789abcdef"));
  }
}
