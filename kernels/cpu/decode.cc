// CPU decoding ops (ops.h, "decoding"): attention over gathered keys and the
// top-k log-softmax. Every row is computed by one thread in a fixed order:
// dot products in kLanes partial sums added by a fixed tree (vectorizable
// without reassociating any one sum), the softmax's sum in double, the
// weighted sum of values in key order. So a row's bits depend on nothing but
// its own inputs: not on the other rows, their number or the thread count.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/detail.h"

namespace tfm::ops::cpu {
namespace {

constexpr int kLanes = 8;

// sum_i a[i] * b[i]: lane l sums the terms i = l (mod kLanes) in order, the
// lanes are added by a fixed tree.
template <typename T>
T dot(const T* a, const T* b, int64_t k) {
  T acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < k; ++i, ++l) acc[l] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

template <typename T>
void attention_rows(const TensorView& q, const TensorView& keys, const TensorView& values,
                    const int32_t* index, const int32_t* lengths, const int32_t* groups,
                    int64_t list_len, float scale, const TensorView& out, const TensorView& probs) {
  const int64_t n = q.dim(0), nh = q.dim(1), k = q.dim(2), e = values.dim(2);
  const T* pq = q.data_as<T>();
  const T* pk = keys.data_as<T>();
  const T* pv = values.data_as<T>();
  T* po = out.data_as<T>();
  T* pp = probs.empty() ? nullptr : probs.data_as<T>();
  const T s = static_cast<T>(scale);
  const int64_t work = n * nh * list_len * (k + e);
#pragma omp parallel if (work > kParallelMin)
  {
    std::vector<T> w(static_cast<size_t>(list_len));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < n * nh; ++r) {
      const int64_t row = r / nh, h = r % nh;
      const int32_t g = groups[row];
      const int32_t* idx = index + g * list_len;
      const int64_t len = lengths[g];
      T* o = po + r * e;
      std::fill(o, o + e, T(0));
      if (len > 0) {
        const T* qr = pq + r * k;
        T mx = -INFINITY;
        for (int64_t j = 0; j < len; ++j) {
          w[static_cast<size_t>(j)] = s * dot(qr, pk + (idx[j] * nh + h) * k, k);
          mx = std::max(mx, w[static_cast<size_t>(j)]);
        }
        double sum = 0;
        for (int64_t j = 0; j < len; ++j) {
          w[static_cast<size_t>(j)] = std::exp(w[static_cast<size_t>(j)] - mx);
          sum += w[static_cast<size_t>(j)];
        }
        const T inv = static_cast<T>(1.0 / sum);
        for (int64_t j = 0; j < len; ++j) {
          const T p = w[static_cast<size_t>(j)] * inv;
          w[static_cast<size_t>(j)] = p;
          const T* vr = pv + (idx[j] * nh + h) * e;
          for (int64_t c = 0; c < e; ++c) o[c] += p * vr[c];
        }
      }
      if (pp) {
        T* pr = pp + r * list_len;
        std::copy(w.begin(), w.begin() + len, pr);
        std::fill(pr + len, pr + list_len, T(0));
      }
    }
  }
}

// The k best of one row into (value, id) pairs, best first; ties: smaller id.
template <typename T>
void top_k(const T* x, int64_t v, int64_t k, std::vector<std::pair<T, int32_t>>& best) {
  best.clear();
  if (k > 64) {  // large k (exhaustive search in tests): a partial sort
    std::vector<int32_t> order(static_cast<size_t>(v));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return x[a] > x[b] || (x[a] == x[b] && a < b);
    });
    for (int64_t i = 0; i < k; ++i) best.emplace_back(x[order[static_cast<size_t>(i)]], order[static_cast<size_t>(i)]);
    return;
  }
  // Insertion into a sorted list; a later equal value has a larger id, so it
  // enters only when strictly larger.
  for (int64_t j = 0; j < v; ++j) {
    const T xj = x[j];
    if (static_cast<int64_t>(best.size()) == k && !(xj > best.back().first)) continue;
    size_t pos = best.size();
    while (pos > 0 && xj > best[pos - 1].first) --pos;
    if (static_cast<int64_t>(best.size()) == k) best.pop_back();
    best.insert(best.begin() + static_cast<int64_t>(pos), {xj, static_cast<int32_t>(j)});
  }
}

}  // namespace

void attention_gather(const TensorView& q, const TensorView& keys, const TensorView& values,
                      const TensorView& index, const TensorView& lengths,
                      const TensorView& groups, float scale, const TensorView& out,
                      const TensorView& probs) {
  const int64_t pool = keys.dim(0), ng = index.dim(0), list_len = index.dim(1);
  const int32_t* idx = index.data_as<int32_t>();
  const int32_t* len = lengths.data_as<int32_t>();
  const int32_t* grp = groups.data_as<int32_t>();
  for (int64_t n = 0; n < q.dim(0); ++n)
    TFM_REQUIRE(grp[n] >= 0 && grp[n] < ng, "attention_gather: groups[{}] is {}, outside [0, {}) (G)",
                n, grp[n], ng);
  for (int64_t g = 0; g < ng; ++g) {
    TFM_REQUIRE(len[g] >= 0 && len[g] <= list_len,
                "attention_gather: lengths[{}] is {}, outside [0, {}] (L)", g, len[g], list_len);
    for (int64_t j = 0; j < len[g]; ++j)
      TFM_REQUIRE(idx[g * list_len + j] >= 0 && idx[g * list_len + j] < pool,
                  "attention_gather: index[{}, {}] is {}, outside the pool [0, {})", g, j,
                  idx[g * list_len + j], pool);
  }
  with_float(out, "attention_gather", [&](auto* po) {
    using T = std::remove_pointer_t<decltype(po)>;
    attention_rows<T>(q, keys, values, idx, len, grp, list_len, scale, out, probs);
  });
}

void log_softmax_topk(const TensorView& logits, const TensorView& values, const TensorView& ids,
                      const TensorView& lse) {
  const int64_t n = logits.dim(0), v = logits.dim(1), k = values.dim(1);
  with_float(logits, "log_softmax_topk", [&](auto* px) {
    using T = std::remove_pointer_t<decltype(px)>;
    T* pvals = values.data_as<T>();
    T* plse = lse.data_as<T>();
    int32_t* pids = ids.data_as<int32_t>();
#pragma omp parallel if (n * v > kParallelMin)
    {
      std::vector<std::pair<T, int32_t>> best;
#pragma omp for schedule(static)
      for (int64_t r = 0; r < n; ++r) {
        const T* x = px + r * v;
        T mx = x[0];
        for (int64_t j = 1; j < v; ++j) mx = std::max(mx, x[j]);
        double sum = 0;  // one exp per logit, in T, summed in double (as the loss)
        for (int64_t j = 0; j < v; ++j) sum += static_cast<T>(std::exp(x[j] - mx));
        const double row_lse = static_cast<double>(mx) + std::log(sum);
        plse[r] = static_cast<T>(row_lse);
        top_k(x, v, k, best);
        for (int64_t i = 0; i < k; ++i) {
          pvals[r * k + i] = static_cast<T>(best[static_cast<size_t>(i)].first - row_lse);
          pids[r * k + i] = best[static_cast<size_t>(i)].second;
        }
      }
    }
  });
}

}  // namespace tfm::ops::cpu
