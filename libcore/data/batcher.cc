#include "libcore/data/batcher.h"

#include <algorithm>
#include <numeric>

namespace tfm {

std::vector<uint32_t> bucket_order(const std::vector<PairLength>& lengths) {
  std::vector<uint32_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const PairLength& x = lengths[a];
    const PairLength& y = lengths[b];
    return x.tgt != y.tgt ? x.tgt < y.tgt : x.src < y.src;
  });
  return order;
}

std::vector<BatchRange> pack_batches(const std::vector<PairLength>& sorted, int64_t max_tokens) {
  std::vector<BatchRange> out;
  BatchRange cur;
  int64_t src_max = 0, tgt_max = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const int64_t s = std::max<int64_t>(src_max, sorted[i].src);
    const int64_t t = std::max<int64_t>(tgt_max, sorted[i].tgt);
    const int64_t n = int64_t{cur.count} + 1;
    if (cur.count > 0 && (n * s > max_tokens || n * t > max_tokens)) {
      out.push_back(cur);
      cur = BatchRange{static_cast<uint32_t>(i), 0};
      src_max = tgt_max = 0;
    }
    if (cur.count == 0) cur.first = static_cast<uint32_t>(i);
    src_max = std::max<int64_t>(src_max, sorted[i].src);
    tgt_max = std::max<int64_t>(tgt_max, sorted[i].tgt);
    ++cur.count;
  }
  if (cur.count > 0) out.push_back(cur);
  return out;
}

BatchCost batch_cost(const std::vector<PairLength>& sorted, const BatchRange& b) {
  int64_t s = 0, t = 0;
  for (uint32_t i = b.first; i < b.first + b.count; ++i) {
    s = std::max<int64_t>(s, sorted[i].src);
    t = std::max<int64_t>(t, sorted[i].tgt);
  }
  return {s * b.count, t * b.count};
}

PackingStats packing_stats(const std::vector<PairLength>& sorted,
                           const std::vector<BatchRange>& batches) {
  PackingStats st;
  st.batches = static_cast<int64_t>(batches.size());
  for (const BatchRange& b : batches) {
    const BatchCost c = batch_cost(sorted, b);
    st.src_padded += c.src;
    st.tgt_padded += c.tgt;
    for (uint32_t i = b.first; i < b.first + b.count; ++i) {
      st.src_real += sorted[i].src;
      st.tgt_real += sorted[i].tgt;
    }
  }
  return st;
}

}  // namespace tfm
