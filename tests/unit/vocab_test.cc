// Vocab (libcore/data/vocab.h) and the tfm-tok library pieces
// (libcore/data/tokenize.h, line_reader.h): a small model trained from
// Multi30k lines (or a synthetic text where the data is not there).
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "libcore/base/error.h"
#include "libcore/data/line_reader.h"
#include "libcore/data/piece_table.h"
#include "libcore/data/tokenize.h"
#include "libcore/data/vocab.h"
#include "libcore/io/checkpoint.h"

#include "tests/support.h"

using namespace tfm;
using Catch::Contains;
using Catch::StartsWith;

namespace {

// A few hundred lines of training text in `path`, English or ("de") German.
void write_corpus(const std::string& path, int lines, const std::string& lang = "en") {
  std::ofstream out(path);
  const std::string gz = "/work/shared/data/multi30k/task1/raw/train." + lang + ".gz";
  if (gzFile f = gzopen(gz.c_str(), "rb")) {
    char line[4096];
    for (int i = 0; i < lines && gzgets(f, line, sizeof line) != nullptr; ++i) out << line;
    gzclose(f);
    return;
  }
  for (int i = 0; i < lines; ++i)
    if (lang == "de")
      out << "ein Mann Nummer " << i << " fährt ein rotes Rad an " << i * 7
          << " Hunden im Park vorbei, sagt A man in a blue shirt\n";
    else
      out << "a man number " << i << " rides a red bike past " << i * 7 << " dogs in the park\n";
}

// Trains one model per test run (shared: training is the slow part).
const std::string& model_path(int vocab_size, const std::string& lang = "en") {
  static test::TempDir dir;
  static std::map<std::string, std::string> models;
  const std::string key = fmt::format("{}{}", lang, vocab_size);
  auto it = models.find(key);
  if (it != models.end()) return it->second;
  const std::string text = dir.file("text." + lang);
  write_corpus(text, 400, lang);
  data::TrainOptions o;
  o.output = dir.file(key + ".model");
  o.vocab_size = vocab_size;
  data::train_vocab({text}, o);
  return models[key] = o.output;
}

// A piece table as an OPUS-MT vocab.json numbers it: "</s>" 0, "<unk>" 1,
// then every other piece of the two models once, shuffled, and "<pad>" last.
std::vector<std::string> marian_table(const Vocab& a, const Vocab& b, uint32_t seed) {
  std::vector<std::string> rest;
  std::set<std::string> seen = {"</s>", "<unk>", "<pad>"};
  for (const Vocab* v : {&a, &b})
    for (int32_t id = 0; id < v->size(); ++id)
      if (seen.insert(std::string(v->piece(id))).second) rest.emplace_back(v->piece(id));
  std::shuffle(rest.begin(), rest.end(), std::mt19937(seed));
  std::vector<std::string> table = {"</s>", "<unk>"};
  table.insert(table.end(), rest.begin(), rest.end());
  table.push_back("<pad>");
  return table;
}

// The bundle of the English (source) and German (target) models.
struct BundleFixture {
  Vocab src = Vocab::load(model_path(300, "en"));
  Vocab tgt = Vocab::load(model_path(300, "de"));
  std::vector<std::string> table = marian_table(src, tgt, 7);
  Vocab bundle = Vocab::from_parts(src.bytes(), tgt.bytes(), table, "test bundle");
};

}  // namespace

TEST_CASE("vocab: reserved ids and pieces", "[vocab]") {
  const Vocab v = Vocab::load(model_path(300));
  CHECK(v.size() == 300);
  CHECK(v.piece(kPadId) == "<pad>");
  CHECK(v.piece(kUnkId) == "<unk>");
  CHECK(v.piece(kBosId) == "<s>");
  CHECK(v.piece(kEosId) == "</s>");
  CHECK(v.id("<pad>") == kPadId);
  CHECK(v.id("</s>") == kEosId);
  CHECK(v.id("no-such-piece-here") == kUnkId);
}

TEST_CASE("vocab: encode/decode round trip and id/piece mapping", "[vocab]") {
  const Vocab v = Vocab::load(model_path(300));
  const std::string text = "A man in a blue shirt is standing on a ladder.";
  const auto pieces = v.encode_pieces(text);
  const auto ids = v.encode_ids(text);
  REQUIRE(pieces.size() == ids.size());
  REQUIRE(!pieces.empty());
  for (size_t i = 0; i < pieces.size(); ++i) {
    CHECK(v.id(pieces[i]) == ids[i]);
    CHECK(v.piece(ids[i]) == pieces[i]);
  }
  CHECK(v.decode_pieces(pieces) == text);
  CHECK(v.decode_ids(ids) == text);
  CHECK(v.encode_pieces("").empty());
  CHECK(data::encode_line(v, "", false).empty());
  CHECK(data::decode_line(v, data::encode_line(v, text, true), true) == text);
  CHECK(data::decode_line(v, data::encode_line(v, text, false), false) == text);
  CHECK_THROWS_WITH(v.piece(300), Contains("out of range"));
  CHECK_THROWS_WITH(v.decode_ids({5, -1}), Contains("out of range"));
  CHECK_THROWS_WITH(data::decode_line(v, "5 x", true), Contains("'x' is not a token id (--ids)"));
}

TEST_CASE("vocab: the piece table maps pieces as SentencePiece does", "[vocab][piece_table]") {
  const Vocab v = Vocab::load(model_path(300));
  CHECK(v.unk_id() == kUnkId);
  const PieceTable t = PieceTable::of(v);
  REQUIRE(int64_t(t.size()) == v.size());
  CHECK(t.unk_id() == v.unk_id());
  CHECK(t.all_valid_utf8());
  for (int32_t id = 0; id < v.size(); ++id) {
    const std::string_view piece = v.piece(id);
    REQUIRE(t.find(piece) == v.id(piece));
    REQUIRE(t.find(piece) == id);
  }
  for (const std::string s : {"never-a-piece", "\xe2\x96\x81zzzzqqq", "x y", "<UNK>"}) {
    CHECK(t.find(s) == -1);
    CHECK(v.id(s) == v.unk_id());
  }
}

TEST_CASE("vocab: fingerprint is stable and tells models apart", "[vocab]") {
  const Vocab a = Vocab::load(model_path(300));
  const Vocab b = Vocab::load(model_path(300));
  const Vocab c = Vocab::load(model_path(320));
  CHECK(a.fingerprint() == b.fingerprint());
  CHECK(a.fingerprint().rfind("spm-", 0) == 0);
  CHECK(a.fingerprint().size() == 20);
  CHECK(a.fingerprint() != c.fingerprint());
  const Vocab d = Vocab::from_bytes(a.bytes(), "copy");
  CHECK(d.fingerprint() == a.fingerprint());
}

TEST_CASE("vocab: loads from a checkpoint's tokenizer slot", "[vocab]") {
  test::TempDir dir;
  const Vocab a = Vocab::load(model_path(300));
  const std::string ckpt = dir.file("model.bin");
  io::write_checkpoint(ckpt, "preset = tiny\n", a.bytes(), {});
  const Vocab b = Vocab::load(ckpt);
  CHECK(b.bytes() == a.bytes());
  CHECK(b.fingerprint() == a.fingerprint());
  CHECK(b.encode_ids("a dog") == a.encode_ids("a dog"));

  const std::string empty = dir.file("empty.bin");
  io::write_checkpoint(empty, "preset = tiny\n", "", {});
  CHECK_THROWS_WITH(Vocab::load(empty), Contains("without a tokenizer"));
}

TEST_CASE("vocab: errors name the file", "[vocab]") {
  test::TempDir dir;
  CHECK_THROWS_WITH(Vocab::load(dir.file("missing.model")), Contains("missing.model"));
  const std::string garbage = dir.file("garbage.model");
  std::ofstream(garbage) << "this is not a model\n";
  CHECK_THROWS_WITH(Vocab::load(garbage), Contains("garbage.model") && Contains("not a SentencePiece"));
  const std::string empty = dir.file("empty.model");
  std::ofstream{empty};
  CHECK_THROWS_WITH(Vocab::load(empty), Contains("empty.model"));
  CHECK_THROWS_AS(Vocab::from_bytes("\x01\x02\x03", "bytes"), Error);
}

TEST_CASE("vocab: training errors and no partial file", "[vocab]") {
  test::TempDir dir;
  const std::string text = dir.file("text.txt");
  write_corpus(text, 50);
  data::TrainOptions o;
  o.output = dir.file("out.model");
  o.vocab_size = 100000;
  CHECK_THROWS_WITH(data::train_vocab({text}, o), Contains("too high"));
  CHECK(!std::filesystem::exists(o.output));
  o.vocab_size = 100;
  CHECK_THROWS_WITH(data::train_vocab({dir.file("nope.txt")}, o), Contains("nope.txt"));
  o.model_type = "word";
  CHECK_THROWS_WITH(data::train_vocab({text}, o), Contains("unknown model type"));
  CHECK(!std::filesystem::exists(o.output));
}

TEST_CASE("line reader: plain, gzip, last line without newline", "[vocab]") {
  test::TempDir dir;
  const std::string plain = dir.file("a.txt");
  std::ofstream(plain) << "one\n\nthree";
  const std::string gz = dir.file("a.gz");
  gzFile f = gzopen(gz.c_str(), "wb");
  gzputs(f, "one\n\nthree");
  gzclose(f);
  for (const std::string& path : {plain, gz}) {
    data::LineReader r(path);
    std::vector<std::string> lines;
    while (r.next_chunk(lines, 2) > 0) {
    }
    CHECK(lines == std::vector<std::string>{"one", "", "three"});
    CHECK(r.line_number() == 3);
  }
  CHECK_THROWS_WITH(data::LineReader(dir.file("nope")), Contains("nope"));
}

TEST_CASE("line reader: blocks of whole lines, across reads and gzip members", "[vocab]") {
  test::TempDir dir;
  std::string text;
  for (int i = 0; i < 200000; ++i) text += fmt::format("line {} {}\n", i, std::string(size_t(i % 13), 'x'));
  text += "last without newline";  // over 2 MiB: several reads
  const std::string plain = dir.file("big.txt"), gz = dir.file("big.gz");
  std::ofstream(plain, std::ios::binary) << text;
  for (const size_t half : {size_t{0}, text.size() / 2}) {  // two gzip members
    gzFile f = gzopen(gz.c_str(), half == 0 ? "wb" : "ab");
    const std::string part = half == 0 ? text.substr(0, text.size() / 2) : text.substr(half);
    gzwrite(f, part.data(), unsigned(part.size()));
    gzclose(f);
  }
  for (const std::string& path : {plain, gz}) {
    for (const size_t max_lines : {size_t{1}, size_t{7}, size_t{65536}}) {
      data::LineReader r(path);
      std::string all, block;
      size_t lines = 0, n;
      while ((n = r.next_block(block, max_lines)) > 0) {
        REQUIRE(n <= max_lines);
        REQUIRE(size_t(std::count(block.begin(), block.end(), '\n')) == n);
        REQUIRE(block.back() == '\n');
        lines += n;
        all += block;
      }
      CHECK(lines == 200001);
      CHECK(r.line_number() == 200001);
      CHECK(all == text + "\n");
      CHECK(r.next_block(block, max_lines) == 0);
    }
  }
  std::ofstream(dir.file("empty.txt")).flush();
  data::LineReader empty(dir.file("empty.txt"));
  std::string block = "stale";
  CHECK(empty.next_block(block, 10) == 0);
  CHECK(block.empty());
}

TEST_CASE("vocab bundle: the table's ids, the source model encodes, the target decodes", "[vocab][bundle]") {
  const BundleFixture f;
  const Vocab& v = f.bundle;
  REQUIRE(v.is_bundle());
  CHECK(!f.src.is_bundle());
  REQUIRE(v.size() == int64_t(f.table.size()));
  CHECK(v.unk_id() == 1);
  for (int32_t id = 0; id < v.size(); ++id) {
    REQUIRE(v.piece(id) == f.table[size_t(id)]);
    REQUIRE(v.id(f.table[size_t(id)]) == id);
  }
  CHECK(v.id("</s>") == 0);
  CHECK(v.id("<pad>") == v.size() - 1);
  CHECK(v.id("never-a-piece") == 1);
  CHECK_THROWS_WITH(v.piece(int32_t(v.size())), Contains("out of range"));

  // The two models segment differently, so each side's model is seen at work.
  const std::string text = "A man in a blue shirt is standing on a ladder.";
  const auto src_pieces = f.src.encode_pieces(text), tgt_pieces = f.tgt.encode_pieces(text);
  REQUIRE(src_pieces != tgt_pieces);
  CHECK(v.encode_pieces(text) == src_pieces);
  CHECK(v.encode_pieces(text, Side::source) == src_pieces);
  CHECK(v.encode_pieces(text, Side::target) == tgt_pieces);

  // Ids through the table, not SentencePiece's (which the shuffle changed).
  const auto ids = v.encode_ids(text);
  REQUIRE(ids.size() == src_pieces.size());
  for (size_t i = 0; i < ids.size(); ++i) CHECK(ids[i] == v.id(src_pieces[i]));
  CHECK(ids != f.src.encode_ids(text));
  const auto tgt_ids = v.encode_ids(text, Side::target);
  REQUIRE(tgt_ids.size() == tgt_pieces.size());
  for (size_t i = 0; i < tgt_ids.size(); ++i) CHECK(tgt_ids[i] == v.id(tgt_pieces[i]));

  // Decoding: the target model by default, the source one when asked.
  // "▁Mann" only the German model has, "zzzqqq" neither.
  const std::vector<std::string> out = {"▁Ein", "▁Mann", "zzzqqq", "▁a", "▁man", "."};
  CHECK(v.decode_pieces(out) == f.tgt.decode_pieces(out));
  CHECK(v.decode_pieces(out, Side::source) == f.src.decode_pieces(out));
  CHECK(v.decode_pieces(out) != v.decode_pieces(out, Side::source));
  CHECK_THAT(v.decode_pieces(out), StartsWith("Ein Mann"));
  CHECK(v.decode_pieces(src_pieces, Side::source) == text);
  CHECK(v.decode_ids(ids, Side::source) == text);
  CHECK(v.decode_ids(tgt_ids) == text);
  std::vector<int32_t> out_ids;
  std::vector<std::string> by_table;  // "zzzqqq" becomes "<unk>"
  for (const std::string& p : out) {
    out_ids.push_back(v.id(p));
    by_table.emplace_back(v.piece(out_ids.back()));
  }
  CHECK(v.decode_ids(out_ids) == f.tgt.decode_pieces(by_table));
  CHECK_THROWS_WITH(v.decode_ids({5, int32_t(v.size())}), Contains("out of range"));

  // A character neither model knows is the table's <unk>.
  const auto unknown = v.encode_ids("\xE2\x98\x83 snow");  // U+2603 SNOWMAN
  CHECK(std::count(unknown.begin(), unknown.end(), v.unk_id()) >= 1);

  // The filter's lines, each side.
  CHECK(data::encode_line(v, text, false) == data::encode_line(f.src, text, false));
  CHECK(data::encode_line(v, text, false, Side::target) == data::encode_line(f.tgt, text, false));
  CHECK(data::decode_line(v, data::encode_line(v, text, true, Side::target), true) == text);
  CHECK(data::decode_line(v, data::encode_line(v, text, true), true, Side::source) == text);

  // tfm-batch's lookup agrees with the table.
  const PieceTable t = PieceTable::of(v);
  CHECK(t.unk_id() == v.unk_id());
  for (const std::string& p : src_pieces) CHECK(t.find(p) == v.id(p));
}

TEST_CASE("vocab bundle: a plain model is the same on both sides", "[vocab][bundle]") {
  const Vocab v = Vocab::load(model_path(300));
  const std::string text = "Two dogs play in the snow.";
  CHECK(v.encode_pieces(text, Side::target) == v.encode_pieces(text));
  CHECK(v.encode_ids(text, Side::target) == v.encode_ids(text));
  CHECK(v.decode_ids(v.encode_ids(text), Side::source) == text);
  CHECK(v.decode_pieces(v.encode_pieces(text), Side::source) == text);
}

TEST_CASE("vocab bundle: bytes, files and checkpoints round trip", "[vocab][bundle]") {
  const BundleFixture f;
  const std::string& bytes = f.bundle.bytes();
  REQUIRE(bytes.rfind("\x89TFMVOCB", 0) == 0);
  const Vocab back = Vocab::from_bytes(bytes, "copy");
  CHECK(back.is_bundle());
  CHECK(back.bytes() == bytes);
  CHECK(back.fingerprint() == f.bundle.fingerprint());
  CHECK(back.size() == f.bundle.size());
  CHECK(back.encode_ids("a dog", Side::target) == f.bundle.encode_ids("a dog", Side::target));
  // The same parts give the same bytes.
  CHECK(Vocab::from_parts(f.src.bytes(), f.tgt.bytes(), f.table, "again").bytes() == bytes);

  test::TempDir dir;
  f.bundle.save(dir.file("v.tfmvocab"));
  const Vocab file = Vocab::load(dir.file("v.tfmvocab"));
  CHECK(file.bytes() == bytes);
  CHECK(file.fingerprint() == f.bundle.fingerprint());
  const std::string ckpt = dir.file("model.bin");
  io::write_checkpoint(ckpt, "preset = tiny\n", bytes, {});
  const Vocab embedded = Vocab::load(ckpt);
  CHECK(embedded.is_bundle());
  CHECK(embedded.bytes() == bytes);

  // One model for both sides (a shared vocabulary) is kept twice, as given.
  const Vocab shared = Vocab::from_parts(f.src.bytes(), f.src.bytes(), f.table, "shared");
  CHECK(shared.encode_pieces("a dog", Side::target) == f.src.encode_pieces("a dog"));
  CHECK(Vocab::from_bytes(shared.bytes(), "shared copy").fingerprint() == shared.fingerprint());
}

TEST_CASE("vocab bundle: fingerprints tell bundles apart", "[vocab][bundle]") {
  const BundleFixture f;
  const std::string fp = f.bundle.fingerprint();
  CHECK(fp.rfind("vocab-", 0) == 0);
  CHECK(fp.size() == 22);
  CHECK(fp != f.src.fingerprint());
  CHECK(fp != f.tgt.fingerprint());
  std::vector<std::string> swapped = f.table;
  std::swap(swapped[5], swapped[6]);
  CHECK(Vocab::from_parts(f.src.bytes(), f.tgt.bytes(), swapped, "swapped").fingerprint() != fp);
  CHECK(Vocab::from_parts(f.tgt.bytes(), f.src.bytes(), f.table, "sides swapped").fingerprint() != fp);
  CHECK(Vocab::from_parts(f.src.bytes(), f.src.bytes(), f.table, "one model").fingerprint() != fp);
  // A target model of the same size, one piece renamed ("▁Mann" -> "▁Wann").
  std::string renamed = f.tgt.bytes();
  const size_t at = renamed.find("\xE2\x96\x81Mann");
  REQUIRE(at != std::string::npos);
  renamed[at + 3] = 'W';
  CHECK(Vocab::from_parts(f.src.bytes(), renamed, f.table, "renamed").fingerprint() != fp);
  // A plain model's table in a bundle is still not that plain model.
  std::vector<std::string> plain;
  for (int32_t id = 0; id < f.src.size(); ++id) plain.emplace_back(f.src.piece(id));
  CHECK(Vocab::from_parts(f.src.bytes(), f.src.bytes(), plain, "as plain").fingerprint() != f.src.fingerprint());
}

TEST_CASE("vocab bundle: bad parts are one sentence each", "[vocab][bundle]") {
  const BundleFixture f;
  const auto parts = [&](std::vector<std::string> table, std::string src = "", std::string tgt = "") {
    return Vocab::from_parts(src.empty() ? f.src.bytes() : src, tgt.empty() ? f.tgt.bytes() : tgt,
                             std::move(table), "opus.tfmvocab");
  };
  std::vector<std::string> dup = f.table;
  dup[9] = dup[4];
  CHECK_THROWS_WITH(parts(dup), Contains("opus.tfmvocab") && Contains("'" + dup[4] + "' twice, at ids 4 and 9"));
  std::vector<std::string> no_unk = f.table;
  no_unk[1] = "<UNK>";
  CHECK_THROWS_WITH(parts(no_unk), Contains("opus.tfmvocab") && Contains("no '<unk>'"));
  CHECK_THROWS_WITH(parts({}), Contains("no '<unk>'"));
  std::vector<std::string> empty_piece = f.table;
  empty_piece[3] = "";
  CHECK_THROWS_WITH(parts(empty_piece), Contains("piece 3") && Contains("0 bytes"));
  std::vector<std::string> not_utf8 = f.table;
  not_utf8[3] = "a\xff";
  CHECK_THROWS_WITH(parts(not_utf8), Contains("piece 3") && Contains("not UTF-8"));
  CHECK_THROWS_WITH(parts(f.table, "not a model"), Contains("opus.tfmvocab: the source model") &&
                                                       Contains("not a SentencePiece model"));
  CHECK_THROWS_WITH(parts(f.table, "", "not a model"), Contains("opus.tfmvocab: the target model"));
  CHECK_THROWS_WITH(Vocab::from_parts("", "", f.table, "x"), Contains("source model"));
}

TEST_CASE("vocab bundle: truncated and garbled containers are refused", "[vocab][bundle]") {
  const BundleFixture f;
  const std::string bytes = f.bundle.bytes();
  // Every cut: one Error naming the origin (the magic's first bytes alone
  // included), never a plain SentencePiece model or a crash.
  for (size_t n = 1; n < bytes.size(); n += (n < 64 ? 1 : 97)) {
    INFO("cut at " << n);
    CHECK_THROWS_WITH(Vocab::from_bytes(bytes.substr(0, n), "cut.tfmvocab"),
                      Contains("cut.tfmvocab is a") && (Contains("truncated") || Contains("corrupt")));
  }
  // A flipped byte in a model, in the table, in the checksum.
  for (const size_t at : {size_t{40}, bytes.size() / 2, bytes.size() - 10, bytes.size() - 1}) {
    std::string bad = bytes;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    INFO("flipped at " << at);
    CHECK_THROWS_WITH(Vocab::from_bytes(bad, "bad.tfmvocab"),
                      Contains("bad.tfmvocab is a corrupt tfm vocabulary bundle: it fails its checksum"));
  }
  // Sizes in the header past the end; another version.
  std::string big = bytes;
  big[23] = '\x7f';  // the source model's size, top byte
  CHECK_THROWS_WITH(Vocab::from_bytes(big, "big.tfmvocab"), Contains("big.tfmvocab is a truncated"));
  std::string v2 = bytes;
  v2[8] = 2;
  CHECK_THROWS_WITH(Vocab::from_bytes(v2, "v2.tfmvocab"), Contains("format version 2"));
  // A plain model is still read as one.
  CHECK(!Vocab::from_bytes(f.src.bytes(), "plain").is_bundle());
}
