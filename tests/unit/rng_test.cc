// Philox4x32-10 against the published known-answer vectors (Random123's
// kat_vectors), and the properties the rest of tfm relies on.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "kernels/ops.h"
#include "libcore/base/rng.h"
#include "tests/support.h"

using namespace tfm;

TEST_CASE("philox4x32-10 reproduces the Random123 known answers", "[rng]") {
  struct Kat {
    Philox4 ctr;
    uint32_t k0, k1;
    Philox4 expect;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Kat& k : kats) {
    const Philox4 got = philox4x32_10(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i) CHECK(got.v[i] == k.expect.v[i]);
  }
}

TEST_CASE("every key component changes the stream and the element index picks a lane", "[rng]") {
  const RngKey base{42, 3, 7};
  const uint32_t x = philox_bits(base, 5);
  CHECK(philox_bits(RngKey{43, 3, 7}, 5) != x);
  CHECK(philox_bits(RngKey{42ull | (1ull << 40), 3, 7}, 5) != x);  // high seed bits count
  CHECK(philox_bits(RngKey{42, 4, 7}, 5) != x);
  CHECK(philox_bits(RngKey{42, 3, 8}, 5) != x);
  CHECK(philox_bits(base, 5) == philox_block(base, 1).v[1]);
  CHECK(philox_bits(base, (1ull << 34) + 2) == philox_block(base, 1ull << 32).v[2]);
}

TEST_CASE("uniform fills [lo, hi] deterministically with the right moments", "[rng]") {
  Stream cpu(Device::cpu());
  const int64_t n = 100003;  // odd: the last Philox block is partial
  Tensor a({n}, DType::f32), b({n}, DType::f32);
  const RngKey key{1234, 9, 2};
  ops::uniform(a, key, -2.0f, 3.0f, cpu);
  ops::uniform(b, key, -2.0f, 3.0f, cpu);
  double sum = 0, sq = 0;
  std::set<float> distinct;
  for (int64_t i = 0; i < n; ++i) {
    const float v = a.data_as<float>()[i];
    REQUIRE(v == b.data_as<float>()[i]);
    REQUIRE(v >= -2.0f);
    REQUIRE(v <= 3.0f);
    REQUIRE(v == uniform_in(philox_bits(key, static_cast<uint64_t>(i)), -2.0f, 5.0f));
    sum += v;
    sq += v * v;
    distinct.insert(v);
  }
  const double mean = sum / n, var = sq / n - mean * mean;
  CHECK(std::abs(mean - 0.5) < 0.03);           // 5 / sqrt(12 n) = 0.0046 standard error
  CHECK(std::abs(var - 25.0 / 12.0) < 0.05);
  CHECK(distinct.size() > static_cast<size_t>(n * 0.99));
}
