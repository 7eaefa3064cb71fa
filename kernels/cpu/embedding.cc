// CPU embeddings (embedding.h): token lookup with its scatter-add backward, and the
// position table add with its backward. f32 or f64; every parameter-gradient
// sum runs in a fixed order (over n, or over b), so results are bit-stable
// whatever the thread count.
#include <algorithm>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/embedding.h"

namespace tfm::ops::cpu {
namespace {

// The CPU reads ids directly, so a bad one is an Error, not a stray write.
void check_ids(const char* op, const TensorView& ids, int64_t vocab) {
  const int32_t* id = ids.data_as<int32_t>();
  for (int64_t n = 0; n < ids.numel(); ++n)
    TFM_REQUIRE(id[n] >= 0 && id[n] < vocab, "{}: ids[{}] is {}, outside the vocabulary [0, {})",
                op, n, id[n], vocab);
}

}  // namespace
}  // namespace tfm::ops::cpu

namespace tfm::ops::impl {
using namespace cpu;  // the helpers above

template <>
void embedding_forward<DeviceType::cpu>(const TensorView& ids, const TensorView& table, float scale,
                                        const TensorView& out, const Stream&) {
  const int64_t vocab = table.dim(0), d = table.dim(1), n = ids.dim(0);
  check_ids("embedding_forward", ids, vocab);
  const int32_t* id = ids.data_as<int32_t>();
  with_float(out, "embedding_forward", [&](auto* po) {
    using T = std::remove_pointer_t<decltype(po)>;
    const T* pt = table.data_as<T>();
    const T s = static_cast<T>(scale);
#pragma omp parallel for if (n * d > kParallelMin)
    for (int64_t r = 0; r < n; ++r) {
      const T* src = pt + static_cast<int64_t>(id[r]) * d;
      T* dst = po + r * d;
      for (int64_t j = 0; j < d; ++j) dst[j] = s * src[j];
    }
  });
}

template <>
void embedding_backward<DeviceType::cpu>(const TensorView& ids, const TensorView& dout, float scale,
                                         const TensorView& dtable, const Stream&) {
  const int64_t vocab = dtable.dim(0), d = dtable.dim(1), n = ids.dim(0);
  check_ids("embedding_backward", ids, vocab);
  const int32_t* id = ids.data_as<int32_t>();
  with_float(dtable, "embedding_backward", [&](auto* pt) {
    using T = std::remove_pointer_t<decltype(pt)>;
    const T* pd = dout.data_as<T>();
    const T s = static_cast<T>(scale);
    // Threads split the columns; each walks every n in order, so repeated
    // ids accumulate in the same order on every run.
    constexpr int64_t kCols = 64;
    const int64_t blocks = (d + kCols - 1) / kCols;
#pragma omp parallel for if (n * d > kParallelMin)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t j0 = blk * kCols, j1 = std::min(d, j0 + kCols);
      for (int64_t r = 0; r < n; ++r) {
        T* dst = pt + static_cast<int64_t>(id[r]) * d;
        const T* src = pd + r * d;
        for (int64_t j = j0; j < j1; ++j) dst[j] += s * src[j];
      }
    }
  });
}

template <>
void position_add<DeviceType::cpu>(const TensorView& x, const TensorView& table, int64_t offset,
                                   const Stream&) {
  const int64_t b_count = x.dim(0), t_count = x.dim(1), d = x.dim(2);
  with_float(x, "position_add", [&](auto* px) {
    using T = std::remove_pointer_t<decltype(px)>;
    const T* pt = table.data_as<T>() + offset * d;
#pragma omp parallel for collapse(2) if (x.numel() > kParallelMin)
    for (int64_t b = 0; b < b_count; ++b)
      for (int64_t t = 0; t < t_count; ++t) {
        T* row = px + (b * t_count + t) * d;
        const T* pos = pt + t * d;
        for (int64_t j = 0; j < d; ++j) row[j] += pos[j];
      }
  });
}

// The offsets read here, on the host (embedding.cc has checked each): one
// for all of x, or one for each b.
template <>
void position_add_at<DeviceType::cpu>(const TensorView& x, const TensorView& table,
                                      const TensorView& offset, const Stream& stream) {
  const int32_t* at = offset.data_as<int32_t>();
  if (offset.numel() == 1) return position_add<DeviceType::cpu>(x, table, at[0], stream);
  const int64_t per_b = x.dim(1) * x.dim(2);
  for (int64_t b = 0; b < x.dim(0); ++b) {
    const TensorView xb(static_cast<char*>(x.data()) + b * per_b * static_cast<int64_t>(dtype_size(x.dtype())),
                        x.dtype(), {1, x.dim(1), x.dim(2)}, x.device());
    position_add<DeviceType::cpu>(xb, table, at[b], stream);
  }
}

template <>
void position_backward<DeviceType::cpu>(const TensorView& dx, int64_t offset,
                                        const TensorView& dtable, const Stream&) {
  const int64_t b_count = dx.dim(0), t_count = dx.dim(1), d = dx.dim(2);
  with_float(dtable, "position_backward", [&](auto* pt) {
    using T = std::remove_pointer_t<decltype(pt)>;
    const T* pd = dx.data_as<T>();
    // Each (t, j) sums over b in order, in double, then adds once.
#pragma omp parallel for if (dx.numel() > kParallelMin)
    for (int64_t t = 0; t < t_count; ++t) {
      std::vector<double> acc(static_cast<size_t>(d), 0.0);
      for (int64_t b = 0; b < b_count; ++b) {
        const T* src = pd + (b * t_count + t) * d;
        for (int64_t j = 0; j < d; ++j) acc[static_cast<size_t>(j)] += src[j];
      }
      T* dst = pt + (offset + t) * d;
      for (int64_t j = 0; j < d; ++j) dst[j] += static_cast<T>(acc[static_cast<size_t>(j)]);
    }
  });
}

}  // namespace tfm::ops::impl
