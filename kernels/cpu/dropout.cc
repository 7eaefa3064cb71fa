// CPU dropout (ops.h): keep_i = uniform01(philox_bits(key, i)) >= p, i the
// flat element index, scaled by 1 / (1 - p) computed in float. The mask is
// recomputed, never stored, and matches the CUDA one bit for bit because
// both come from libcore/rng.h.
#include <cstring>

#include "kernels/cpu/common.h"
#include "kernels/detail.h"

namespace tfm::ops::cpu {
namespace {

// out_i = base_i + x_i * keep_i * inv (base null: no add). One Philox block
// gives four elements. out may alias x or base element by element.
template <typename T>
void dropout_apply(const T* base, const T* x, T* out, int64_t n, float p, const RngKey& key) {
  const T inv = static_cast<T>(1.0f / (1.0f - p));
  if (p == 0.0f) {  // every element kept; inv is exactly 1
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) out[i] = base ? base[i] + x[i] : x[i];
    return;
  }
  const int64_t blocks = (n + 3) / 4;
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const Philox4 r = philox_block(key, static_cast<uint64_t>(blk));
    for (int64_t lane = 0; lane < 4 && blk * 4 + lane < n; ++lane) {
      const int64_t i = blk * 4 + lane;
      const T kept = uniform01(r.v[lane]) >= p ? x[i] * inv : T(0);
      out[i] = base ? base[i] + kept : kept;
    }
  }
}

}  // namespace

void dropout_forward(const TensorView& x, float p, const RngKey& key, const TensorView& y) {
  with_float(y, "dropout_forward", [&](auto* py) {
    using T = std::remove_pointer_t<decltype(py)>;
    dropout_apply<T>(nullptr, x.data_as<T>(), py, y.numel(), p, key);
  });
}

void dropout_backward(const TensorView& dy, float p, const RngKey& key, const TensorView& dx) {
  with_float(dx, "dropout_backward", [&](auto* pdx) {
    using T = std::remove_pointer_t<decltype(pdx)>;
    dropout_apply<T>(nullptr, dy.data_as<T>(), pdx, dx.numel(), p, key);
  });
}

void add_dropout_forward(const TensorView& residual, const TensorView& s, float p,
                         const RngKey& key, const TensorView& y) {
  with_float(y, "add_dropout_forward", [&](auto* py) {
    using T = std::remove_pointer_t<decltype(py)>;
    dropout_apply<T>(residual.data_as<T>(), s.data_as<T>(), py, y.numel(), p, key);
  });
}

}  // namespace tfm::ops::cpu
