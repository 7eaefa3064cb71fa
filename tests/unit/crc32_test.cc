// CRC-32 (libcore/io/crc32.h): the folding path and the table path against
// zlib's crc32 at every length around the 16- and 64-byte boundaries, at
// every alignment, and chained.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <random>
#include <string>

#include "libcore/io/crc32.h"

TEST_CASE("crc32 equals zlib's at every length, alignment and split", "[crc32]") {
  std::mt19937 rng(11);
  std::string bytes(5000, '\0');
  for (char& c : bytes) c = char(rng());
  auto zlib = [](const char* p, size_t n) {
    return uint32_t(::crc32(0, reinterpret_cast<const Bytef*>(p), uInt(n)));
  };
  for (size_t offset = 0; offset < 16; ++offset)
    for (size_t n = 0; n <= 300; ++n)
      REQUIRE(tfm::io::crc32(0, bytes.data() + offset, n) == zlib(bytes.data() + offset, n));
  for (const size_t n : {size_t{1000}, size_t{4096}, size_t{4999}})
    CHECK(tfm::io::crc32(0, bytes.data() + 1, n) == zlib(bytes.data() + 1, n));
  for (size_t split = 0; split <= 400; split += 7) {
    const uint32_t first = tfm::io::crc32(0, bytes.data(), split);
    CHECK(tfm::io::crc32(first, bytes.data() + split, 4000 - split) == zlib(bytes.data(), 4000));
  }
  CHECK(tfm::io::crc32(0, "123456789", 9) == 0xCBF43926u);  // the check value of CRC-32/ISO-HDLC
  CHECK(tfm::io::crc32(0, nullptr, 0) == 0);
}
