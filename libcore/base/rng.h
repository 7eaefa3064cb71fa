// Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11, the
// generator of Random123, cuRAND and PyTorch), identical on CPU and GPU.
//
// A random number is a pure function of (seed, tensor, step, element): no
// state is carried from one call to the next. So a CPU run and a GPU run of
// the same step drop the same units, any element can be computed by any
// thread in any order, and a resumed run continues the exact sequence from
// the step number alone.
//
// Layout: Philox key = (seed low 32 bits, seed high 32 bits);
//         counter    = (block low, block high, tensor, step);
// element i of a tensor takes lane i % 4 of block i / 4.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TFM_HD __host__ __device__ __forceinline__
#else
#define TFM_HD inline
#endif

namespace tfm {

struct RngKey {
  uint64_t seed = 0;
  uint32_t tensor = 0;  // which tensor of the model or step (a fixed id)
  uint32_t step = 0;    // training step (or any other counter)
};

struct Philox4 {
  uint32_t v[4];
};

TFM_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

// The raw generator: 10 rounds of Philox4x32 on (counter, key).
TFM_HD Philox4 philox4x32_10(Philox4 ctr, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kM0, ctr.v[0], hi0, lo0);
    philox_mulhilo(kM1, ctr.v[2], hi1, lo1);
    ctr = Philox4{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
    k0 += kW0;
    k1 += kW1;
  }
  return ctr;
}

// Four random words for elements 4*block .. 4*block+3 of a tensor.
TFM_HD Philox4 philox_block(const RngKey& key, uint64_t block) {
  Philox4 ctr{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), key.tensor,
               key.step}};
  return philox4x32_10(ctr, static_cast<uint32_t>(key.seed), static_cast<uint32_t>(key.seed >> 32));
}

TFM_HD uint32_t philox_bits(const RngKey& key, uint64_t element) {
  return philox_block(key, element >> 2).v[element & 3];
}

// Uniform in [0, 1) with 24 random bits: exact in float on every device.
TFM_HD float uniform01(uint32_t bits) { return static_cast<float>(bits >> 8) * 0x1p-24f; }

// lo + span * uniform01(bits), rounded identically on every device: nvcc
// would otherwise contract the expression into one fused multiply-add.
TFM_HD float uniform_in(uint32_t bits, float lo, float span) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(lo, __fmul_rn(span, uniform01(bits)));
#else
  return lo + span * uniform01(bits);
#endif
}

}  // namespace tfm
