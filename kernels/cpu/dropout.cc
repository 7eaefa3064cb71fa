// CPU dropout (dropout.h): keep_i = uniform01(philox_bits(key, i)) >= p, i the
// flat element index, scaled by 1 / (1 - p) computed in float. The mask is
// recomputed, never stored, and matches the CUDA one bit for bit because
// both come from libcore/base/rng.h.
#include <algorithm>

#include "kernels/cpu/common.h"
#include "kernels/cpu/vector.h"
#include "kernels/dropout.h"

namespace tfm::ops::cpu {
namespace {

// Philox blocks (of four elements) per unit of parallel work.
constexpr int64_t kBlocksPerChunk = 1024;

// Elements [4 * b0, min(n, 4 * b1)) of out_i = base_i + x_i * keep_i * inv
// (base null: no add). Sixteen Philox blocks at a time, computed lane-parallel
// into `bits` and then applied, so both loops vectorize.
template <typename T>
TFM_CPU_CLONES void dropout_blocks(const T* base, const T* x, T* out, int64_t b0, int64_t b1,
                                   int64_t n, float p, T inv, RngKey key) {
  constexpr int64_t kGroup = 16;
  uint32_t bits[4 * kGroup];
  for (int64_t g = b0; g < b1; g += kGroup) {
#pragma omp simd
    for (int64_t j = 0; j < kGroup; ++j) {
      const Philox4 r = philox_block(key, static_cast<uint64_t>(g + j));
      for (int lane = 0; lane < 4; ++lane) bits[4 * j + lane] = r.v[lane];
    }
    const int64_t e0 = 4 * g, e1 = std::min({n, 4 * b1, e0 + 4 * kGroup});
#pragma omp simd
    for (int64_t i = e0; i < e1; ++i) {
      const T kept = uniform01(bits[i - e0]) >= p ? x[i] * inv : T(0);
      out[i] = base ? base[i] + kept : kept;
    }
  }
}

// out_i = base_i + x_i * keep_i * inv (base null: no add), inv = 1 / (1 - p)
// in float. out may alias x or base element by element.
template <typename T>
void dropout_apply(const T* base, const T* x, T* out, int64_t n, float p, const RngKey& key) {
  const T inv = static_cast<T>(1.0f / (1.0f - p));
  if (p == 0.0f) {  // every element kept; inv is exactly 1
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) out[i] = base ? base[i] + x[i] : x[i];
    return;
  }
  const int64_t blocks = (n + 3) / 4;
  parallel_chunks(blocks, kBlocksPerChunk, [&](int64_t b0, int64_t b1) {
    dropout_blocks<T>(base, x, out, b0, b1, n, p, inv, key);
  });
}

}  // namespace
}  // namespace tfm::ops::cpu

namespace tfm::ops::impl {
using namespace cpu;  // the helpers above

template <>
void dropout_forward<DeviceType::cpu>(const TensorView& x, float p, const RngKey& key,
                                      const TensorView& y, const Stream&) {
  with_float(y, "dropout_forward", [&](auto* py) {
    using T = std::remove_pointer_t<decltype(py)>;
    dropout_apply<T>(nullptr, x.data_as<T>(), py, y.numel(), p, key);
  });
}

template <>
void dropout_backward<DeviceType::cpu>(const TensorView& dy, float p, const RngKey& key,
                                       const TensorView& dx, const Stream&) {
  with_float(dx, "dropout_backward", [&](auto* pdx) {
    using T = std::remove_pointer_t<decltype(pdx)>;
    dropout_apply<T>(nullptr, dy.data_as<T>(), pdx, dx.numel(), p, key);
  });
}

// Unpadded tiles are the flat dropout (and as fast); padded ones go row by
// row, each row's kept elements found from the unpadded tile's flat index.
template <>
void attention_dropout<DeviceType::cpu>(const TensorView& x, int64_t t, int64_t s, float p,
                                        const RngKey& key, const TensorView& y, const Stream&) {
  const int64_t tp = x.dim(-2), sp = x.dim(-1), g = x.numel() / (tp * sp);
  with_float(y, "attention_dropout", [&](auto* py) {
    using T = std::remove_pointer_t<decltype(py)>;
    const T* px = x.data_as<T>();
    if (tp == t && sp == s) return dropout_apply<T>(nullptr, px, py, y.numel(), p, key);
    const T inv = static_cast<T>(1.0f / (1.0f - p));
#pragma omp parallel for if (g * tp * sp > kParallelMin)
    for (int64_t r = 0; r < g * tp; ++r) {
      const int64_t i = r % tp;
      const T* in = px + r * sp;
      T* out = py + r * sp;
      const int64_t kept_cols = i < t ? s : 0;
      const uint64_t first = static_cast<uint64_t>(((r / tp) * t + i) * s);
      for (int64_t j = 0; j < kept_cols; ++j)
        out[j] = uniform01(philox_bits(key, first + static_cast<uint64_t>(j))) >= p ? in[j] * inv : T(0);
      for (int64_t j = kept_cols; j < sp; ++j) out[j] = T(0);
    }
  });
}

template <>
void add_dropout_forward<DeviceType::cpu>(const TensorView& residual, const TensorView& s, float p,
                                          const RngKey& key, const TensorView& y, const Stream&) {
  with_float(y, "add_dropout_forward", [&](auto* py) {
    using T = std::remove_pointer_t<decltype(py)>;
    dropout_apply<T>(residual.data_as<T>(), s.data_as<T>(), py, y.numel(), p, key);
  });
}

}  // namespace tfm::ops::impl
