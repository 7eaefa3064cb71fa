// The binary readers (libcore/io/safetensors.h, zip_read.h, npz.h,
// pickle.h, torch_read.h) on files built byte by byte here: stored,
// deflated and ZIP64 archives, npy versions and layouts, pickles opcode by
// opcode, and corrupted variants, each refused with one Error naming it.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <cstring>
#include <string>
#include <vector>

#include "libcore/io/npz.h"
#include "libcore/io/pickle.h"
#include "libcore/io/safetensors.h"
#include "libcore/io/torch_read.h"
#include "libcore/io/zip_read.h"
#include "tests/support.h"

using tfm::test::error_of;
using namespace tfm::io;
using namespace std::string_literals;

namespace {

std::string le(uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

template <typename T>
std::string raw(std::initializer_list<T> values) {
  std::string s(values.size() * sizeof(T), '\0');
  std::memcpy(s.data(), std::data(values), s.size());
  return s;
}

// Pickle pieces: a BINUNICODE string, a GLOBAL.
std::string str(const std::string& s) {
  std::string out(1, 'X');
  out += le(s.size(), 4);
  return out + s;
}
std::string global(const std::string& module, const std::string& name) {
  std::string out(1, 'c');
  out += module;
  out += '\n';
  return out + name + '\n';
}

struct ZipItem {
  std::string name, data;
  bool deflate = false;
};

std::string deflate_raw(const std::string& in) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, in.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// A ZIP archive as APPNOTE describes it; with zip64 every size and offset
// goes through the ZIP64 extra fields and end records.
std::string make_zip(const std::vector<ZipItem>& items, bool zip64 = false) {
  std::string out, directory;
  for (const ZipItem& it : items) {
    const std::string packed = it.deflate ? deflate_raw(it.data) : it.data;
    const uint32_t crc = static_cast<uint32_t>(::crc32(0, reinterpret_cast<const Bytef*>(it.data.data()), static_cast<uInt>(it.data.size())));
    const uint64_t offset = out.size();
    const uint64_t ones = 0xffffffff;
    const std::string method = le(it.deflate ? 8 : 0, 2);
    const std::string local_extra = zip64 ? le(1, 2) + le(16, 2) + le(it.data.size(), 8) + le(packed.size(), 8) : "";
    out += le(0x04034b50, 4) + le(45, 2) + le(0, 2) + method + le(0, 4) + le(crc, 4) +
           le(zip64 ? ones : packed.size(), 4) + le(zip64 ? ones : it.data.size(), 4) + le(it.name.size(), 2) +
           le(local_extra.size(), 2) + it.name + local_extra + packed;
    const std::string extra = zip64 ? le(1, 2) + le(24, 2) + le(it.data.size(), 8) + le(packed.size(), 8) + le(offset, 8) : "";
    directory += le(0x02014b50, 4) + le(45, 2) + le(45, 2) + le(0, 2) + method + le(0, 4) + le(crc, 4) +
                 le(zip64 ? ones : packed.size(), 4) + le(zip64 ? ones : it.data.size(), 4) + le(it.name.size(), 2) +
                 le(extra.size(), 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(zip64 ? ones : offset, 4) +
                 it.name + extra;
  }
  const uint64_t directory_offset = out.size();
  out += directory;
  if (zip64) {
    const uint64_t end64 = out.size();
    out += le(0x06064b50, 4) + le(44, 8) + le(45, 2) + le(45, 2) + le(0, 4) + le(0, 4) + le(items.size(), 8) +
           le(items.size(), 8) + le(directory.size(), 8) + le(directory_offset, 8);
    out += le(0x07064b50, 4) + le(0, 4) + le(end64, 8) + le(1, 4);
    out += le(0x06054b50, 4) + le(0, 4) + le(0xffff, 2) + le(0xffff, 2) + le(0xffffffff, 4) + le(0xffffffff, 4) + le(0, 2);
  } else {
    out += le(0x06054b50, 4) + le(0, 4) + le(items.size(), 2) + le(items.size(), 2) + le(directory.size(), 4) +
           le(directory_offset, 4) + le(0, 2);
  }
  return out;
}

// An .npy file: the header dict padded so that the data starts at a
// multiple of 64, as numpy writes it.
std::string npy(const std::string& descr, bool fortran, const std::string& shape, const std::string& data, int major = 1) {
  const size_t length_size = major == 1 ? 2 : 4;
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                       ", 'shape': " + shape + ", }";
  while ((8 + length_size + header.size() + 1) % 64) header += ' ';
  header += '\n';
  return std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0' + le(header.size(), static_cast<int>(length_size)) +
         header + data;
}

}  // namespace

TEST_CASE("npz archives read stored, deflated and ZIP64, every npy version", "[npz][zip]") {
  const std::string yml = "type: transformer\ndim-emb: 8\n";
  const std::string f32 = raw<float>({1.5f, -2, 3, 4, 5, 6});
  for (const bool deflate : {false, true})
    for (const bool zip64 : {false, true}) {
      const std::string zip = make_zip({{"w.npy", npy("<f4", false, "(2, 3)", f32), deflate},
                                        {"special:model.yml.npy", npy("|i1", false, fmt::format("({},)", yml.size()), yml, 2), deflate},
                                        {"col.npy", npy("<i8", true, "(2, 3)", raw<int64_t>({1, 4, 2, 5, 3, 6}), 3), deflate},
                                        {"be.npy", npy(">f2", false, "(2,)", std::string("\x3c\x00\xc0\x00", 4)), deflate},
                                        {"scalar.npy", npy("<f8", false, "()", raw<double>({0.25})), deflate},
                                        {"mask.npy", npy("|b1", false, "(0, 3)", ""), deflate}},
                                       zip64);
      const auto arrays = parse_npz(zip, "model.npz");
      REQUIRE(arrays.size() == 6);
      CHECK(arrays[0].name == "w");
      CHECK(arrays[0].array.shape == std::vector<int64_t>{2, 3});
      CHECK(arrays[0].array.to_f32() == std::vector<float>{1.5f, -2, 3, 4, 5, 6});
      CHECK(arrays[1].name == "special:model.yml");
      CHECK(arrays[1].array.text() == yml);
      CHECK(arrays[2].array.to_i64() == std::vector<int64_t>{1, 2, 3, 4, 5, 6});  // Fortran order into C order
      CHECK(arrays[3].array.to_f32() == std::vector<float>{1.0f, -2.0f});         // big-endian swapped
      CHECK(arrays[4].array.shape.empty());
      CHECK(arrays[4].array.to_f64() == std::vector<double>{0.25});
      CHECK(arrays[5].array.numel() == 0);
    }
}

TEST_CASE("npz and zip refuse corrupt archives with one message", "[npz][zip]") {
  const std::string good = make_zip({{"w.npy", npy("<f4", false, "(4,)", raw<float>({1, 2, 3, 4})), true}});
  const auto err = [](const std::string& bytes) { return error_of([&] { parse_npz(bytes, "m.npz"); }); };
  CHECK(err("hello") == "m.npz is not an .npz archive (it is not a ZIP file)");
  CHECK(err(good.substr(0, good.size() - 10)) ==
        "m.npz is truncated or not a ZIP archive: it has no end-of-central-directory record");
  std::string flipped = good;
  flipped[40] ^= 0x55;  // inside the deflated data
  CHECK(err(flipped).rfind("m.npz: entry 'w.npy' is corrupt", 0) == 0);
  std::string crc = good;
  crc[good.find(std::string("PK\1\2", 4)) + 16] ^= 1;  // the directory's CRC-32
  CHECK(err(crc) == "m.npz: entry 'w.npy' is corrupt: CRC-32 mismatch");
  std::string huge = good;
  const size_t central = good.find(std::string("PK\1\2", 4));
  huge.replace(central + 24, 4, le(0xfffffff0u, 4));  // the size, a lie
  CHECK(err(huge).find("claims sizes the file cannot hold") != std::string::npos);
  std::string encrypted = good;
  encrypted[central + 8] = 1;
  CHECK(err(encrypted) == "m.npz: entry 'w.npy' is encrypted, which is not read");
  CHECK(err(make_zip({{"w.txt", "x"}})) == "m.npz holds 'w.txt', which is not an .npy array");
  CHECK(err(make_zip({{"a.npy", npy("<u2", false, "(1,)", "xx")}})) ==
        "m.npz: 'a' has element type '<u2', which is not read (f8 f4 f2 i8 i4 i2 i1 u1 b1 are)");
  CHECK(err(make_zip({{"a.npy", npy("<f4", false, "(3,)", "xx")}})) ==
        "m.npz: 'a' holds 2 bytes of data, but its shape (3) of f32 needs 12 (is it truncated?)");
  CHECK(err(make_zip({{"a.npy", npy("<f4", false, "(-1,)", "")}})) == "m.npz: 'a' has a negative dimension in its shape (-1)");
  CHECK(err(make_zip({{"a.npy", npy("<f4", false, "(1099511627776, 1099511627776)", "")}})) ==
        "m.npz: 'a' has shape (1099511627776, 1099511627776), more bytes than the file can hold");
  CHECK(err(make_zip({{"a.npy", "\x93NUMPY\x01\x00\x05\x00{'a'}"s}})).find("has a malformed .npy header") != std::string::npos);
  CHECK(err(make_zip({{"a.npy", "\x93NUMPY\x01\x00\xff\x00{}"s}})) == "m.npz: 'a' is truncated: its .npy header runs past its end");
  CHECK(err(make_zip({{"a.npy", "NUMPY and more"}})) == "m.npz: 'a' is not an .npy array: the magic is wrong");
}

TEST_CASE("safetensors files read, and every inconsistency is refused", "[safetensors]") {
  const auto file = [](const std::string& header, const std::string& data) { return le(header.size(), 8) + header + data; };
  const std::string data = raw<float>({1, 2, 3, 4}) + raw<uint16_t>({0x3f80, 0xc000}) + std::string("\x01\x00", 2);
  const std::string header =
      R"({"__metadata__": {"format": "pt"}, "b": {"dtype": "BF16", "shape": [2], "data_offsets": [16, 20]},)"
      R"( "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}, "m": {"dtype": "BOOL", "shape": [1, 2], "data_offsets": [20, 22]}})";
  const Safetensors s = parse_safetensors(file(header + "    ", data), "m.safetensors");
  REQUIRE(s.tensors.size() == 3);
  CHECK(s.tensors[0].name == "b");  // header order
  CHECK(s.tensors[0].array.to_f32() == std::vector<float>{1, -2});
  CHECK(s.tensors[1].array.to_f32() == std::vector<float>{1, 2, 3, 4});
  CHECK(s.tensors[2].array.to_i64() == std::vector<int64_t>{1, 0});
  CHECK(s.metadata["format"].as_string() == "pt");

  const auto err = [&](const std::string& h, const std::string& d) {
    return error_of([&] { parse_safetensors(file(h, d), "m.safetensors"); });
  };
  const auto one = [&](const std::string& entry, const std::string& d) { return err("{\"t\": " + entry + "}", d); };
  CHECK(error_of([&] { parse_safetensors("abc", "m.safetensors"); }) ==
        "m.safetensors is not a safetensors file: it is shorter than the 8-byte header length");
  CHECK(error_of([&] { parse_safetensors(le(1000, 8) + "{}", "m.safetensors"); }) ==
        "m.safetensors is truncated or not a safetensors file: its header length (1000 bytes) exceeds the file (10 bytes)");
  CHECK(err("[1]", "") == "m.safetensors is not a safetensors file: its header is not a JSON object");
  CHECK(err("{\"t\": ", "") == "m.safetensors: the header is not valid JSON: expected a JSON value, got the end of the text (m.safetensors:1:7)");
  CHECK(one(R"({"dtype": "F8", "shape": [1], "data_offsets": [0, 1]})", "x") ==
        "m.safetensors: tensor 't' has an unknown dtype 'F8' (F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL are read)");
  CHECK(one(R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 4]})", "xxxx") ==
        "m.safetensors: tensor 't' has shape (2) of F32: 8 bytes, but its data_offsets span 4");
  CHECK(one(R"({"dtype": "F32", "shape": [1], "data_offsets": [4, 8]})", "xxxx") ==
        "m.safetensors: tensor 't' has data_offsets [4, 8] outside the 4 bytes of data (is the file truncated?)");
  CHECK(one(R"({"dtype": "F32", "shape": [1], "data_offsets": [4, 0]})", "xxxx") ==
        "m.safetensors: tensor 't' has data_offsets [4, 0] outside the 4 bytes of data");
  CHECK(one(R"({"dtype": "F32", "shape": [1]})", "xxxx") == "m.safetensors: 't' has no key 'data_offsets'");
  CHECK(one(R"({"dtype": "F32", "shape": 1, "data_offsets": [0, 4]})", "xxxx") ==
        "m.safetensors: 't.shape' must be a list, got an integer");
  CHECK(err(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "b": {"dtype": "I16", "shape": [2], "data_offsets": [2, 6]}})",
            "xxxxxx") == "m.safetensors: tensors 'a' and 'b' overlap in the data");
  CHECK(err(R"({"__metadata__": {"k": 1}})", "") == "m.safetensors: '__metadata__.k' must be a string, got an integer");
}

TEST_CASE("pickles read opcode by opcode, executing nothing", "[pickle][torch]") {
  const auto load = [](const std::string& p) { return unpickle(p, "p.pkl", {}); };
  // {'args': argparse.Namespace(lr=0.5), 'big': 2**64 + 1, 'min': -2**63, 's': {3}, 'b': b'\xff'} (protocol 2)
  const std::string p = "\x80\x02}q\x00("s + str("args") + global("argparse", "Namespace") + ")\x81}" + str("lr") + "G" +
                        "\x3f\xe0\0\0\0\0\0\0"s + "sb" + str("big") + "\x8a\x09\x01\0\0\0\0\0\0\0\x01"s + str("min") +
                        "\x8a\x08\0\0\0\0\0\0\0\x80"s + str("s") + global("__builtin__", "set") + "]K\x03" "a\x85R" + str("b") +
                        global("_codecs", "encode") + str("\xc3\xbf") + str("latin1") + "\x86Ru.";
  const Value v = load(p);
  CHECK(v["args"].as_object().class_name == "argparse.Namespace");
  CHECK(v["args"]["lr"].as_float() == 0.5);
  CHECK(v["big"].as_float() == 18446744073709551616.0);
  CHECK(v["min"].as_int() == INT64_MIN);
  CHECK(v["s"].items().at(0).as_int() == 3);
  CHECK(v["b"].as_bytes() == "\xff");
  CHECK(error_of([&] { v["args"]["lr"].as_string(); }) == "p.pkl: 'args.lr' must be a string, got a float");

  // Protocol 4: FRAME, MEMOIZE, STACK_GLOBAL, NEWOBJ_EX with keyword arguments, BUILD.
  const std::string p4 = "\x80\x04\x95\x00\0\0\0\0\0\0\0\x8c\x03mod\x94\x8c\x01K\x94\x93\x94)}\x8c\x01k\x94K\x07s\x92\x94"s +
                         "}\x8c\x01" "a\x94h\x02sb.";
  const Value o = load(p4);
  CHECK(o.as_object().class_name == "mod.K");
  CHECK(o.as_object().kwargs["k"].as_int() == 7);
  CHECK(o["a"].as_object().class_name == "mod.K");  // the memoized class, from its state
  CHECK(o["a"].as_object().global);

  const auto err = [&](const std::string& bytes) { return error_of([&] { load(bytes); }); };
  CHECK(err("\x80\x02\xff") == "p.pkl: opcode 0xff is not read (pickle offset 2)");
  CHECK(err("\x80\x02S'a'\n.") == "p.pkl: opcode 0x53 ('S') is not read (pickle offset 2)");
  CHECK(err("\x80\x02X\x10\x00\x00\x00ab"s) == "p.pkl: the pickle is truncated (pickle offset 2)");
  CHECK(err("\x80\x02NN.") == "p.pkl: the pickle stops with values left on its stack (pickle offset 4)");
  CHECK(err("\x80\x02h\x05.") == "p.pkl: the memo has no entry 5 (pickle offset 2)");
  CHECK(err("\x80\x02.") == "p.pkl: the pickle pops from an empty stack (pickle offset 2)");
  CHECK(err("\x80\x02(t(u.") == "p.pkl: SETITEM on a tuple (pickle offset 5)");
  CHECK(err("\x80\x02]q\x00h\x00\x61."s) == "p.pkl: '[0]' contains itself");
  CHECK(err("\x80\x02" + str("k") + "Q.").rfind("p.pkl: the pickle refers to data outside it", 0) == 0);
  CHECK(err("\x80\x09.") == "p.pkl: pickle protocol 9 (up to 5 is read) (pickle offset 0)");
}

TEST_CASE("torch.save archives rebuild views from their storages", "[torch]") {
  // {'w': a (2, 2) view of a 6-element storage at offset 1, strides (1, 2)}
  const std::string pickle = "\x80\x02" + global("collections", "OrderedDict") + ")R(" + str("w") +
                             global("torch._utils", "_rebuild_tensor_v2") + "((" + str("storage") +
                             global("torch", "FloatStorage") + str("0") + str("cpu") + "K\x06tQ" +
                             "K\x01K\x02K\x02\x86K\x01K\x02\x86\x89" + global("collections", "OrderedDict") + ")RtRu.";
  const std::string storage = raw<float>({0, 1, 2, 3, 4, 5});
  const std::string zip = make_zip({{"ckpt/data.pkl", pickle}, {"ckpt/data/0", storage}, {"ckpt/version", "3\n"}});
  const Value v = parse_torch(zip, "ckpt.pt");
  CHECK(v["w"].as_array().shape == std::vector<int64_t>{2, 2});
  CHECK(v["w"].as_array().to_f32() == std::vector<float>{1, 3, 2, 4});

  const auto err = [](const std::string& bytes) { return error_of([&] { parse_torch(bytes, "ckpt.pt"); }); };
  CHECK(err(make_zip({{"ckpt/data.pkl", pickle}, {"ckpt/data/0", raw<float>({0, 1, 2, 3})}})) ==
        "ckpt.pt: storage 0 holds 16 bytes, not 6 elements of f32");
  CHECK(err(make_zip({{"ckpt/data.pkl", pickle}})) == "ckpt.pt: storage 0 has no entry ckpt/data/0 in the archive");
  std::string far = pickle;
  far.replace(far.find("K\x01K\x02K\x02\x86"), 2, "K\x03");  // offset 3: the last element read is 6
  CHECK(err(make_zip({{"ckpt/data.pkl", far}, {"ckpt/data/0", storage}})) ==
        "ckpt.pt: a tensor reads past the end of its storage (6 elements from offset 3 with strides (1, 2))");
  CHECK(err(make_zip({{"model/weights", "x"}})) == "ckpt.pt is a ZIP archive without data.pkl: not a file of torch.save");
  CHECK(err(make_zip({{"ckpt/data.pkl", pickle}, {"ckpt/data/0", storage}, {"ckpt/byteorder", "middle"}})) ==
        "ckpt.pt: its byteorder is 'middle', neither little nor big");
  CHECK(err("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"s) ==
        "ckpt.pt is in PyTorch's legacy format (saved before PyTorch 1.6 or without the zip format): re-save it with a "
        "newer PyTorch (torch.save(torch.load(f), f))");
  CHECK(err("not a checkpoint") == "ckpt.pt is not a file of torch.save (it is not a ZIP archive)");
}
