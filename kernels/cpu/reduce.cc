// CPU reductions (reduce.h): column sums (bias gradients), the sum of squares
// (gradient norms for clipping) and in-place scaling. Sums run in double in
// a fixed order and a fixed chunking, so results do not depend on the number
// of threads.
#include <algorithm>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/vector.h"
#include "kernels/reduce.h"

namespace tfm::ops::cpu {
namespace {

constexpr int64_t kSumCols = 64;

// out[j] += sum_r x[r, j] for the columns [j0, j1) of x (R, N), in double,
// each column over the rows in order.
template <typename T>
TFM_CPU_CLONES void column_sums(const T* x, T* out, int64_t rows, int64_t n, int64_t j0,
                                int64_t j1) {
  double acc[kSumCols] = {};
  const int64_t w = j1 - j0;
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n + j0;
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) acc[j] += static_cast<double>(xr[j]);
  }
  for (int64_t j = 0; j < w; ++j) out[j0 + j] += static_cast<T>(acc[j]);
}

}  // namespace
}  // namespace tfm::ops::cpu

namespace tfm::ops::impl {
using namespace cpu;  // the helpers above

template <>
void sum_rows<DeviceType::cpu>(const TensorView& x, const TensorView& out, const Stream&) {
  const int64_t n = x.dim(-1), rows = x.numel() / n;
  with_float(out, "sum_rows", [&](auto* po) {
    using T = std::remove_pointer_t<decltype(po)>;
    const T* px = x.data_as<T>();
    // Threads split the columns; each column sums its rows in order.
    const int64_t blocks = (n + kSumCols - 1) / kSumCols;
#pragma omp parallel for if (x.numel() > kParallelMin)
    for (int64_t blk = 0; blk < blocks; ++blk)
      column_sums(px, po, rows, n, blk * kSumCols, std::min(n, (blk + 1) * kSumCols));
  });
}

template <>
void sum_squares<DeviceType::cpu>(const TensorView& x, const TensorView& out, const Stream&) {
  with_float(out, "sum_squares", [&](auto* po) {
    using T = std::remove_pointer_t<decltype(po)>;
    const T* px = x.data_as<T>();
    const int64_t n = x.numel();
    // Fixed chunks, each summed in order, then the chunk sums in order.
    constexpr int64_t kChunk = 4096;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<double> part(static_cast<size_t>(chunks), 0.0);
#pragma omp parallel for if (n > kParallelMin)
    for (int64_t c = 0; c < chunks; ++c) {
      double acc = 0;
      for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i)
        acc += static_cast<double>(px[i]) * px[i];
      part[static_cast<size_t>(c)] = acc;
    }
    double total = 0;
    for (double v : part) total += v;
    po[0] = static_cast<T>(total);
  });
}

template <>
void scale<DeviceType::cpu>(const TensorView& x, float alpha, const Stream&) {
  with_float(x, "scale", [&](auto* px) {
    using T = std::remove_pointer_t<decltype(px)>;
    const T a = static_cast<T>(alpha);
    const int64_t n = x.numel();
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) px[i] *= a;
  });
}

}  // namespace tfm::ops::impl
