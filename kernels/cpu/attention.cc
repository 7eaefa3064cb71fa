// CPU attention pieces (attention.h): the head split/merge permutation and the
// masked softmax with its backward. Masks come from per-sentence key lengths
// and the causal flag, never from a mask tensor; hidden keys get exactly 0
// and a row that sees no key is all 0 (no NaN).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/vector.h"

namespace tfm::ops::cpu {
namespace {

// p = softmax(s[0, visible)) followed by zeros up to tk; p may alias s (each
// s[j] is read before p[j] is written).
template <typename T>
TFM_CPU_CLONES void softmax_row(const T* s, int64_t visible, int64_t tk, T* p) {
  if (visible > 0) {
    const T mx = max_lanes(s, visible);
    const double sum = sum_lanes(visible, [&](int64_t j) { return p[j] = exp_fast(s[j] - mx); });
    const T inv = static_cast<T>(1.0 / sum);
#pragma omp simd
    for (int64_t j = 0; j < visible; ++j) p[j] *= inv;
  }
  for (int64_t j = visible; j < tk; ++j) p[j] = T(0);
}

}  // namespace

// heads[b, h, t, :] <-> rows[offsets[b] + t, col + h X : col + (h + 1) X]: row
// pieces of X move with memcpy; unpack zeroes the padding.
template <bool kUnpack>
void move_heads(const TensorView& rows, const TensorView& offsets, const TensorView& heads,
                int64_t col) {
  const int64_t nb = heads.dim(0), nh = heads.dim(1), nl = heads.dim(2), nx = heads.dim(3);
  const int32_t* off = offsets.data_as<int32_t>();
  for (int64_t b = 0; b < nb; ++b)
    TFM_REQUIRE(off[0] == 0 && off[b] <= off[b + 1] && off[b + 1] - off[b] <= nl &&
                    off[b + 1] <= rows.dim(0),
                "{}: offsets[{}..{}] = {}..{} is not a sentence of at most {} of the {} rows "
                "(offsets start at 0 and never decrease)",
                kUnpack ? "unpack_heads" : "pack_heads", b, b + 1, off[b], off[b + 1], nl,
                rows.dim(0));
  const size_t elem = dtype_size(heads.dtype()), piece = static_cast<size_t>(nx) * elem;
  const size_t stride = static_cast<size_t>(rows.dim(1)) * elem;  // bytes from row to row
  char* pr = static_cast<char*>(rows.data()) + static_cast<size_t>(col) * elem;
  char* ph = static_cast<char*>(heads.data());
#pragma omp parallel for collapse(2) if (heads.numel() > kParallelMin)
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t len = off[b + 1] - off[b];
      char* head = ph + static_cast<size_t>((b * nh + h) * nl) * piece;
      char* row = pr + static_cast<size_t>(off[b]) * stride + static_cast<size_t>(h) * piece;
      for (int64_t t = 0; t < len; ++t) {
        char* r = row + static_cast<size_t>(t) * stride;
        if constexpr (kUnpack) std::memcpy(head + t * piece, r, piece);
        else std::memcpy(r, head + t * piece, piece);
      }
      if constexpr (kUnpack) std::memset(head + len * piece, 0, (nl - len) * piece);
    }
}
}  // namespace tfm::ops::cpu

namespace tfm::ops::impl {
using namespace cpu;  // the helpers above

// y[a, c, b, :] = x[a, b, c, :]: whole rows of D move with memcpy.
template <>
void permute_0213<DeviceType::cpu>(const TensorView& x, const TensorView& y, const Stream&) {
  const int64_t na = x.dim(0), nb = x.dim(1), nc = x.dim(2), d = x.dim(3);
  const size_t row = static_cast<size_t>(d) * dtype_size(x.dtype());
  const char* px = static_cast<const char*>(x.data());
  char* py = static_cast<char*>(y.data());
#pragma omp parallel for collapse(2) if (x.numel() > kParallelMin)
  for (int64_t a = 0; a < na; ++a)
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t c = 0; c < nc; ++c)
        std::memcpy(py + static_cast<size_t>((a * nc + c) * nb + b) * row,
                    px + static_cast<size_t>((a * nb + b) * nc + c) * row, row);
}

template <>
void unpack_heads<DeviceType::cpu>(const TensorView& rows, const TensorView& offsets,
                                   const TensorView& heads, int64_t col, const Stream&) {
  move_heads<true>(rows, offsets, heads, col);
}

template <>
void pack_heads<DeviceType::cpu>(const TensorView& heads, const TensorView& offsets,
                                 const TensorView& rows, int64_t col, const Stream&) {
  move_heads<false>(rows, offsets, heads, col);
}

template <>
void masked_softmax_forward<DeviceType::cpu>(const TensorView& scores, const TensorView& k_lengths,
                                             bool causal, const TensorView& probs, const Stream&) {
  const int64_t nb = scores.dim(0), nh = scores.dim(1), tq = scores.dim(2), tk = scores.dim(3);
  const int32_t* len = k_lengths.data_as<int32_t>();
  for (int64_t b = 0; b < nb; ++b)
    TFM_REQUIRE(len[b] >= 0 && len[b] <= tk,
                "masked_softmax_forward: k_lengths[{}] is {}, outside [0, {}] (Tk)", b, len[b], tk);
  with_float(probs, "masked_softmax_forward", [&](auto* pp) {
    using T = std::remove_pointer_t<decltype(pp)>;
    const T* ps = scores.data_as<T>();
    const int64_t rows = nb * nh * tq;
#pragma omp parallel for if (scores.numel() > kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % tq, b = r / (nh * tq);
      // Keys [0, visible) are seen; the rest are hidden.
      const int64_t visible = causal ? std::min<int64_t>(len[b], i + 1) : len[b];
      softmax_row(ps + r * tk, std::max<int64_t>(visible, 0), tk, pp + r * tk);
    }
  });
}

// dscores = probs * (dprobs - sum_j probs * dprobs), per row of Tk.
template <>
void masked_softmax_backward<DeviceType::cpu>(const TensorView& probs, const TensorView& dprobs,
                                              const TensorView& dscores, const Stream&) {
  const int64_t tk = probs.dim(-1), rows = probs.numel() / tk;
  with_float(dscores, "masked_softmax_backward", [&](auto* pds) {
    using T = std::remove_pointer_t<decltype(pds)>;
    const T* pp = probs.data_as<T>();
    const T* pdp = dprobs.data_as<T>();
#pragma omp parallel for if (probs.numel() > kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
      const T* p = pp + r * tk;
      const T* dp = pdp + r * tk;
      double dot = 0;
      for (int64_t j = 0; j < tk; ++j) dot += static_cast<double>(p[j]) * dp[j];
      const T dt = static_cast<T>(dot);
      T* ds = pds + r * tk;
      for (int64_t j = 0; j < tk; ++j) ds[j] = p[j] * (dp[j] - dt);
    }
  });
}

}  // namespace tfm::ops::impl
