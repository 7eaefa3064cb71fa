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

#include "libcore/base/error.h"
#include "libcore/data/line_reader.h"
#include "libcore/data/piece_table.h"
#include "libcore/data/tokenize.h"
#include "libcore/data/vocab.h"
#include "libcore/io/checkpoint.h"

#include "tests/support.h"

using namespace tfm;
using Catch::Contains;

namespace {

// A few hundred lines of training text in `path`.
void write_corpus(const std::string& path, int lines) {
  std::ofstream out(path);
  const char* gz = "/work/shared/data/multi30k/task1/raw/train.en.gz";
  if (gzFile f = gzopen(gz, "rb")) {
    char line[4096];
    for (int i = 0; i < lines && gzgets(f, line, sizeof line) != nullptr; ++i) out << line;
    gzclose(f);
    return;
  }
  for (int i = 0; i < lines; ++i)
    out << "a man number " << i << " rides a red bike past " << i * 7 << " dogs in the park\n";
}

// Trains one model per test run (shared: training is the slow part).
const std::string& model_path(int vocab_size) {
  static test::TempDir dir;
  static std::map<int, std::string> models;
  auto it = models.find(vocab_size);
  if (it != models.end()) return it->second;
  const std::string text = dir.file("text.txt");
  write_corpus(text, 400);
  data::TrainOptions o;
  o.output = dir.file(fmt::format("m{}.model", vocab_size));
  o.vocab_size = vocab_size;
  data::train_vocab({text}, o);
  return models[vocab_size] = o.output;
}

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
