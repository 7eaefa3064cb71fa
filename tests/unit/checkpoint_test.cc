// Checkpoint files (libcore/io/checkpoint.h, man/tfm.7 "CHECKPOINT FORMAT"):
// round trips, atomic writes, and a clear tfm::Error naming the file for
// every kind of damage: cut anywhere, any byte flipped, hand-crafted lies.
#include <catch2/catch.hpp>

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include "libcore/io/atomic_file.h"
#include "libcore/io/checkpoint.h"

#include "tests/support.h"

using namespace tfm;
using namespace tfm::io;
using Catch::Contains;
using test::error_of;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void spit(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}


// Bytes that differ from tensor to tensor and element to element.
CheckpointTensor make_tensor(std::string name, DType dtype, Shape shape, uint32_t seed) {
  CheckpointTensor t{std::move(name), dtype, shape, {}};
  t.data.resize(static_cast<size_t>(shape.numel()) * dtype_size(dtype));
  uint32_t x = seed * 2654435761u + 12345u;
  for (std::byte& b : t.data) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return t;
}

Checkpoint sample(bool with_tokenizer) {
  Checkpoint c;
  c.config = "d_model = 512\nheads = 8\nname = \"Grüße\"\n";
  if (with_tokenizer)
    for (int i = 0; i < 300; ++i) c.tokenizer.push_back(static_cast<char>(i * 7));
  uint32_t seed = 1;
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32}) {
    const std::string n(dtype_name(dt));
    c.tensors.push_back(make_tensor(n + ".r0", dt, Shape{}, seed++));
    c.tensors.push_back(make_tensor(n + ".r1", dt, Shape{5}, seed++));
    c.tensors.push_back(make_tensor(n + ".r2", dt, Shape{3, 4}, seed++));
    c.tensors.push_back(make_tensor(n + ".empty", dt, Shape{0, 7}, seed++));
    c.tensors.push_back(make_tensor(n + ".r3", dt, Shape{2, 3, 1}, seed++));
    c.tensors.push_back(make_tensor(n + ".r4", dt, Shape{1, 2, 3, 2}, seed++));
    c.tensors.push_back(make_tensor(n + ".r5", dt, Shape{2, 1, 2, 1, 3}, seed++));
    c.tensors.push_back(make_tensor(n + ".r6", dt, Shape{1, 2, 1, 2, 1, 3}, seed++));
  }
  c.tensors.push_back(make_tensor("last.empty", DType::f32, Shape{4, 0}, seed++));
  c.sections = {{"train.state", "step = 1234\n"}, {"empty", ""}, {"blob", std::string(100, '\x01')}};
  return c;
}

void require_same(const Checkpoint& got, const Checkpoint& want) {
  CHECK(got.config == want.config);
  CHECK(got.tokenizer == want.tokenizer);
  REQUIRE(got.tensors.size() == want.tensors.size());
  for (size_t i = 0; i < want.tensors.size(); ++i) {
    INFO("tensor " << want.tensors[i].name);
    CHECK(got.tensors[i].name == want.tensors[i].name);
    CHECK(got.tensors[i].dtype == want.tensors[i].dtype);
    CHECK(got.tensors[i].shape == want.tensors[i].shape);
    CHECK(got.tensors[i].data == want.tensors[i].data);
  }
  CHECK(got.sections == want.sections);
}

// ---- hand-crafted files: an independent little writer for lies ----

uint32_t crc32_bitwise(std::string_view s) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}
template <typename T>
void le(std::string& s, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) s.push_back(static_cast<char>((uint64_t{v} >> (8 * i)) & 0xff));
}
void le_name(std::string& s, std::string_view n) {
  le<uint16_t>(s, static_cast<uint16_t>(n.size()));
  s.append(n);
}

struct RawSection {
  std::string name;
  uint16_t kind;
  std::string bytes;
  uint16_t codec = 0;          // stored
  uint64_t raw_override = 0;   // claim another raw size when nonzero
};

// A complete file with correct checksums around whatever the sections say.
std::string craft(const std::vector<RawSection>& sections, uint32_t version = 1) {
  std::string body, dir;
  for (const RawSection& s : sections) {
    le_name(dir, s.name);
    le<uint16_t>(dir, s.kind);
    le<uint16_t>(dir, s.codec);
    le<uint64_t>(dir, 64 + body.size());
    le<uint64_t>(dir, s.bytes.size());
    le<uint64_t>(dir, s.raw_override ? s.raw_override : s.bytes.size());
    le<uint32_t>(dir, crc32_bitwise(s.bytes));
    le<uint32_t>(dir, crc32_bitwise(s.bytes));
    body += s.bytes;
  }
  std::string h = "\x89TFMCKPT";
  le<uint32_t>(h, version);
  le<uint32_t>(h, 0);
  le<uint64_t>(h, 64 + body.size() + dir.size());
  le<uint64_t>(h, 64 + body.size());
  le<uint64_t>(h, dir.size());
  le<uint32_t>(h, static_cast<uint32_t>(sections.size()));
  le<uint32_t>(h, crc32_bitwise(dir));
  h.resize(60, '\0');
  le<uint32_t>(h, crc32_bitwise(h));
  return h + body + dir;
}

struct RawTensor {
  std::string name;
  uint8_t dtype;
  std::vector<uint64_t> dims;
  uint64_t offset, bytes;
};
std::string table_of(const std::vector<RawTensor>& ts, uint32_t count_override = 0) {
  std::string t;
  le<uint32_t>(t, count_override ? count_override : static_cast<uint32_t>(ts.size()));
  for (const RawTensor& r : ts) {
    le_name(t, r.name);
    le<uint8_t>(t, r.dtype);
    le<uint8_t>(t, static_cast<uint8_t>(r.dims.size()));
    for (uint64_t d : r.dims) le<uint64_t>(t, d);
    le<uint64_t>(t, r.offset);
    le<uint64_t>(t, r.bytes);
  }
  return t;
}
std::vector<RawSection> crafted(const std::vector<RawTensor>& ts, std::string data) {
  return {{"config", 1, "d_model = 4\n"},
          {"tokenizer", 2, "spm"},
          {"tensor_table", 3, table_of(ts)},
          {"tensors", 4, std::move(data)}};
}

}  // namespace

TEST_CASE("checkpoints round-trip every dtype and rank with empty tensors and tokenizer", "[checkpoint]") {
  test::TempDir dir;
  for (bool with_tokenizer : {true, false}) {
    const Checkpoint want = sample(with_tokenizer);
    const std::string path = dir.file(with_tokenizer ? "a.bin" : "b.bin");
    write_checkpoint(path, want);
    require_same(read_checkpoint(path), want);

    const CheckpointInfo info = read_checkpoint_info(path);
    CHECK(info.version == kCheckpointVersion);
    CHECK(info.config == want.config);
    CHECK(info.file_bytes == std::filesystem::file_size(path));
    REQUIRE(info.tensors.size() == want.tensors.size());
    for (size_t i = 0; i < info.tensors.size(); ++i) {
      CHECK(info.tensors[i].name == want.tensors[i].name);
      CHECK(info.tensors[i].shape == want.tensors[i].shape);
      CHECK(info.tensors[i].bytes == want.tensors[i].data.size());
      CHECK(info.tensors[i].offset % 64 == 0);
    }
    REQUIRE(info.sections.size() == 7);
    CHECK(info.sections[0].name == "config");
    CHECK(info.sections[3].kind == SectionKind::tensors);
    CHECK(info.sections[4].name == "train.state");
    CHECK(info.find("bf16.r2")->shape == Shape{3, 4});
    CHECK(info.find("nope") == nullptr);
    CHECK(read_checkpoint_section(path, "train.state") == "step = 1234\n");
    CHECK(read_checkpoint_section(path, "empty").empty());
    CHECK_THAT(error_of([&] { read_checkpoint_section(path, "tensors"); }),
               Contains(path) && Contains("has no section named 'tensors'"));
    CHECK(read_checkpoint(path).find("i32.r6")->data == want.find("i32.r6")->data);
  }
  // Nothing at all is a checkpoint too.
  write_checkpoint(dir.file("c.bin"), Checkpoint{});
  require_same(read_checkpoint(dir.file("c.bin")), Checkpoint{});
  CHECK(dir.entries() == 3);  // no temporary files left
}

TEST_CASE("big tensors stream across chunk boundaries from and into flat buffers", "[checkpoint]") {
  test::TempDir dir;
  // One flat buffer, viewed as tensors (how the model's parameters live).
  const size_t n_big = 1'300'000, n_zero = 1'500'000, n_small = 333;
  std::vector<float> flat(n_big + n_zero + n_small, 0.0f);
  for (size_t i = 0; i < n_big; ++i) flat[i] = static_cast<float>(i % 9973) * 0.37f - 11.0f;
  for (size_t i = 0; i < n_small; ++i) flat[n_big + n_zero + i] = static_cast<float>(i);
  const std::vector<NamedTensor> tensors = {
      {"big", TensorView(flat.data(), DType::f32, Shape{1300, 1000})},
      {"zeros", TensorView(flat.data() + n_big, DType::f32, Shape{3, 500, 1000})},
      {"small", TensorView(flat.data() + n_big + n_zero, DType::f32, Shape{333})}};
  const std::string state(3'000'000, 'x');
  const std::vector<NamedSection> sections = {{"adam", state}};
  for (int threads : {1, 2}) {
    const std::string path = dir.file(fmt::format("big{}.bin", threads));
    write_checkpoint(path, "cfg", "", tensors, sections, {.zstd_level = 1, .threads = threads});
    const Checkpoint got = read_checkpoint(path);
    REQUIRE(got.tensors.size() == 3);
    for (size_t i = 0; i < 3; ++i) {
      INFO(tensors[i].name);
      REQUIRE(got.tensors[i].data.size() == tensors[i].view.bytes());
      CHECK(std::memcmp(got.tensors[i].data.data(), tensors[i].view.data(),
                        tensors[i].view.bytes()) == 0);
    }
    CHECK(*got.find_section("adam") == state);

    // Straight into another flat buffer, skipping one tensor.
    std::vector<float> back(flat.size(), -1.0f);
    size_t at = 0;
    std::vector<std::string> asked;
    read_checkpoint_tensors(path, [&](const TensorInfo& t) {
      asked.push_back(t.name);
      std::span<std::byte> dst(reinterpret_cast<std::byte*>(back.data() + at), t.bytes);
      at += t.bytes / 4;
      return t.name == "zeros" ? std::span<std::byte>() : dst;
    });
    CHECK(asked == std::vector<std::string>{"big", "zeros", "small"});
    CHECK(std::memcmp(back.data(), flat.data(), n_big * 4) == 0);
    CHECK(back[n_big] == -1.0f);
    CHECK(std::memcmp(back.data() + n_big + n_zero, flat.data() + n_big + n_zero, n_small * 4) == 0);
    CHECK_THAT(error_of([&] {
                 read_checkpoint_tensors(path, [&](const TensorInfo&) {
                   return std::span<std::byte>(reinterpret_cast<std::byte*>(back.data()), 4);
                 });
               }),
               Contains("tensor 'big' has 5200000 bytes, but its destination holds 4"));
  }
}

TEST_CASE("checkpoint writes are atomic", "[checkpoint]") {
  test::TempDir dir;
  const Checkpoint ckpt = sample(true);

  // Into a directory that does not exist: an error, and nothing appears.
  const std::string nowhere = dir.file("no/such/dir/model.bin");
  CHECK_THAT(error_of([&] { write_checkpoint(nowhere, ckpt); }),
             Contains("cannot write " + nowhere) && Contains("No such file or directory"));
  CHECK(dir.entries() == 0);

  const std::string path = dir.file("model.bin");
  write_checkpoint(path, ckpt);
  const std::string before = slurp(path);

  // Refused before writing: duplicate names, reserved section names.
  Checkpoint dup = ckpt;
  dup.tensors.push_back(dup.tensors[3]);
  CHECK_THAT(error_of([&] { write_checkpoint(path, dup); }),
             Contains(path) && Contains("two tensors are named 'f32.empty'"));
  Checkpoint reserved = ckpt;
  reserved.sections.emplace_back("tensors", "x");
  CHECK_THAT(error_of([&] { write_checkpoint(path, reserved); }),
             Contains(path) && Contains("'tensors' is a reserved section name"));
  Checkpoint short_data = ckpt;
  short_data.tensors[1].data.pop_back();
  CHECK_THAT(error_of([&] { write_checkpoint(path, short_data); }),
             Contains(path) && Contains("tensor 'f32.r1' is f32 (5), which takes 20 bytes, but it holds 19"));

  // Failing halfway through the data: the file grows past the size limit.
  Checkpoint big = ckpt;
  big.tensors.push_back(make_tensor("big", DType::f32, Shape{1 << 20}, 99));
  rlimit old{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
  rlimit low = old;
  low.rlim_cur = 1 << 20;
  auto* old_handler = signal(SIGXFSZ, SIG_IGN);
  REQUIRE(setrlimit(RLIMIT_FSIZE, &low) == 0);
  const std::string err = error_of([&] { write_checkpoint(path, big); });
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, old_handler);
  CHECK_THAT(err, Contains("cannot write " + path) && Contains("File too large"));

  // Failing at the rename: the target is a directory.
  std::filesystem::create_directory(dir.file("taken"));
  CHECK_THAT(error_of([&] { write_checkpoint(dir.file("taken"), ckpt); }),
             Contains("cannot write " + dir.file("taken")));

  CHECK(slurp(path) == before);
  CHECK(dir.entries() == 2);  // model.bin and taken/: no temporary files
  require_same(read_checkpoint(path), ckpt);
}

// A target that is no regular file (a FIFO here; /dev/null, /dev/stdout) is
// written in place: a rename would replace the FIFO or device itself.
TEST_CASE("atomic writes to a fifo go through it and leave it a fifo", "[checkpoint]") {
  test::TempDir dir;
  const std::string fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string got;
  std::thread reader([&] {
    std::ifstream in(fifo, std::ios::binary);
    got.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  });
  io::write_file_atomic(fifo, "measure\tvalue\n");
  reader.join();
  CHECK(got == "measure\tvalue\n");
  CHECK(std::filesystem::is_fifo(fifo));
  CHECK(dir.entries() == 1);  // no temporary file beside it

  // Out of order, a pipe cannot take it: one clear error.
  std::thread drain([&] {
    std::ifstream in(fifo, std::ios::binary);
    got.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  });
  CHECK_THAT(error_of([&] {
               io::AtomicFile file(fifo);
               file.write("abcd");
               file.write_at(0, "x", 1);
             }),
             Contains("cannot write " + fifo) && Contains("in order only"));
  drain.join();
  CHECK(got == "abcd");
  CHECK(std::filesystem::is_fifo(fifo));
}

TEST_CASE("a checkpoint cut anywhere is reported as truncated or corrupt", "[checkpoint]") {
  test::TempDir dir;
  const std::string good = dir.file("good.bin"), cut = dir.file("cut.bin");
  write_checkpoint(good, sample(true));
  const std::string bytes = slurp(good);
  spit(cut, bytes);
  for (size_t n = bytes.size(); n-- > 0;) {  // shorter and shorter, in place
    std::filesystem::resize_file(cut, n);
    const std::string msg = error_of([&] { read_checkpoint(cut); });
    INFO("cut at " << n << " of " << bytes.size() << ": " << msg);
    REQUIRE_THAT(msg, Contains(cut) && (Contains("truncated") || Contains("not a tfm checkpoint")));
    REQUIRE_THAT(error_of([&] { read_checkpoint_info(cut); }), Contains(cut));
  }
  // And longer than it says.
  spit(cut, bytes + "x");
  CHECK_THAT(error_of([&] { read_checkpoint(cut); }),
             Contains(cut + " is corrupt: it has " + std::to_string(bytes.size() + 1) + " bytes"));

  // A big one, cut inside its compressed tensor data.
  Checkpoint big = sample(false);
  big.tensors.push_back(make_tensor("big", DType::f32, Shape{700, 1000}, 5));
  write_checkpoint(good, big);
  const std::string big_bytes = slurp(good);
  for (size_t n = 1000; n < big_bytes.size(); n += 177'777) {
    spit(cut, std::string_view(big_bytes).substr(0, n));
    CHECK_THAT(error_of([&] { read_checkpoint(cut); }), Contains(cut) && Contains("truncated"));
  }
}

TEST_CASE("every flipped byte of a checkpoint is caught by a checksum", "[checkpoint]") {
  test::TempDir dir;
  const std::string good = dir.file("good.bin"), bad = dir.file("bad.bin");
  write_checkpoint(good, sample(true));
  const std::string bytes = slurp(good);
  const CheckpointInfo info = read_checkpoint_info(good);
  // Section i occupies [start[i], start[i + 1]); the directory follows.
  std::vector<uint64_t> start = {64};
  for (const SectionInfo& s : info.sections) start.push_back(start.back() + s.stored_bytes);
  spit(bad, bytes);
  std::fstream file(bad, std::ios::binary | std::ios::in | std::ios::out);
  auto poke = [&](size_t at, char c) {  // one byte in place, flushed for the reader
    file.seekp(static_cast<std::streamoff>(at));
    file.put(c);
    file.flush();
    REQUIRE(file.good());
  };
  for (size_t at = 0; at < bytes.size(); ++at) {
    poke(at, static_cast<char>(bytes[at] ^ (at % 2 ? 0x01 : 0x80)));
    std::string want;
    if (at < 8) {
      want = bad + " is not a tfm checkpoint";
    } else if (at < 12) {
      want = bad + " is a tfm checkpoint of format version";
    } else if (at < 64) {
      want = bad + " is corrupt: its header fails its checksum";
    } else if (at >= start.back()) {
      want = bad + " is corrupt: its directory fails its checksum";
    } else {
      size_t s = 0;
      while (at >= start[s + 1]) ++s;
      want = bad + " is corrupt: section '" + info.sections[s].name + "' fails its checksum";
    }
    const std::string msg = error_of([&] { read_checkpoint(bad); });
    INFO("byte " << at << ": " << msg);
    REQUIRE_THAT(msg, Contains(want));
    poke(at, bytes[at]);
  }
  file.close();
  require_same(read_checkpoint(bad), sample(true));
}

TEST_CASE("hand-crafted lies in a checkpoint get one sentence each", "[checkpoint]") {
  test::TempDir dir;
  const std::string path = dir.file("lie.bin");
  auto error_for = [&](std::string_view file) {
    spit(path, file);
    return error_of([&] { read_checkpoint(path); });
  };
  const std::string data(48, '\x02');
  const RawTensor a{"a", 0, {3, 4}, 0, 48};

  // The crafter itself writes good files (all sections stored, not zstd).
  spit(path, craft(crafted({a}, data)));
  const Checkpoint ok = read_checkpoint(path);
  CHECK(ok.tokenizer == "spm");
  CHECK(ok.find("a")->data == std::vector<std::byte>(48, std::byte{2}));

  CHECK(error_for("") == path + " is empty, not a tfm checkpoint");
  CHECK(error_for("PK\x03\x04 not a checkpoint at all, but long enough to have a header .....") ==
        path + " is not a tfm checkpoint");
  CHECK(error_for(craft(crafted({a}, data), 2)) ==
        path + " is a tfm checkpoint of format version 2, but this tfm reads only version 1");

  struct Case {
    std::string what;
    std::vector<RawSection> file;
    std::string message;
  };
  auto with = [&](std::vector<RawSection> s, size_t i, auto edit) {
    edit(s[i]);
    return s;
  };
  const uint64_t huge = uint64_t{1} << 60;
  const std::vector<Case> cases = {
      {"duplicate tensor names", crafted({a, {"a", 0, {3, 4}, 64, 48}}, data + std::string(64, 0)),
       "tensor 'a' appears twice in its tensor table"},
      {"unknown dtype", crafted({{"a", 9, {3, 4}, 0, 48}}, data), "tensor 'a' has unknown dtype code 9"},
      {"rank over 6", crafted({{"a", 0, {1, 1, 1, 1, 1, 1, 1}, 0, 4}}, data),
       "tensor 'a' has rank 7, over the limit of 6"},
      {"shape and size disagree", crafted({{"a", 0, {3, 4}, 0, 40}}, data),
       "tensor 'a' is f32 (3, 4), which takes 48 bytes, but the table says 40"},
      {"a tensor of 2^60 bytes", crafted({{"a", 0, {huge / 4}, 0, huge}}, data),
       "tensor 'a' lies beyond the 48 bytes of tensor data"},
      {"a shape whose size overflows", crafted({{"a", 1, {huge, huge}, 0, 0}}, data),
       "tensor 'a' has a shape too large for any file"},
      {"overlapping tensors", crafted({a, {"b", 0, {2}, 40, 8}}, data),
       "tensor 'b' overlaps the tensor before it"},
      {"2^32 - 1 tensors claimed", with(crafted({a}, data), 2, [](RawSection& s) { s.bytes[0] = s.bytes[1] = s.bytes[2] = s.bytes[3] = '\xff'; }),
       "its tensor table ends in the middle of an entry"},
      {"a stored section claiming 2^60 bytes", with(crafted({a}, data), 3, [&](RawSection& s) { s.raw_override = huge; }),
       "section 'tensors' claims 1152921504606846976 bytes, more than its 48 stored bytes can hold"},
      {"a zstd section claiming 2^60 bytes", with(crafted({a}, data), 1, [&](RawSection& s) { s.codec = 1; s.raw_override = huge; }),
       "section 'tokenizer' claims 1152921504606846976 bytes, more than its 3 stored bytes can hold"},
      {"garbage where zstd should be", with(crafted({a}, data), 1, [&](RawSection& s) { s.codec = 1; }),
       "section 'tokenizer' cannot be decompressed"},
      {"an unknown codec", with(crafted({a}, data), 1, [&](RawSection& s) { s.codec = 7; }),
       "compressed with codec 7, which this tfm does not know"},
      {"an unknown section kind", with(crafted({a}, data), 0, [&](RawSection& s) { s.kind = 9; }),
       "has a section 'config' of kind 9, which this tfm does not know"},
      {"a kind that does not match the name", with(crafted({a}, data), 0, [&](RawSection& s) { s.kind = 2; }),
       "section 'config' has kind 2, which does not go with its name"},
      {"two sections of one name", with(crafted({a}, data), 0, [&](RawSection& s) { s.name = "tokenizer"; s.kind = 2; }),
       "two sections are named 'tokenizer'"},
      {"a missing section", {{"config", 1, ""}, {"tokenizer", 2, ""}, {"tensor_table", 3, table_of({})}},
       "it has no 'tensors' section"},
      {"an empty tensor name", crafted({{"", 0, {}, 0, 4}}, data), "its tensor table holds an empty name"},
      {"a tensor table with bytes after its last tensor", with(crafted({a}, data), 2, [](RawSection& s) { s.bytes += "zz"; }),
       "its tensor table has bytes after its last tensor"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    CHECK_THAT(error_for(craft(c.file)), Contains(path + " ") && Contains(c.message));
  }

  // A directory entry count far past the directory's bytes.
  std::string file = craft(crafted({a}, data));
  file[40] = file[41] = file[42] = '\xff';
  std::string header = file.substr(0, 60);
  const uint32_t crc = crc32_bitwise(header);
  std::memcpy(file.data() + 60, &crc, 4);  // little-endian hosts only, as tfm is
  CHECK_THAT(error_for(file), Contains(path + " is corrupt: its directory ends in the middle of an entry"));
}
