#include "libcore/data/batcher.h"

#include <algorithm>

namespace tfm {

std::vector<uint32_t> bucket_order(const std::vector<PairLength>& lengths) {
  // LSD radix sort of the 22-bit keys in two stable passes of 11 bits.
  constexpr int kBits = 11;
  constexpr uint32_t kDigits = 1u << kBits;
  const size_t n = lengths.size();
  std::vector<uint32_t> keys(n), order(n), keys2(n), order2(n);
  for (size_t i = 0; i < n; ++i) {
    keys[i] = bucket_key(lengths[i]);
    order[i] = static_cast<uint32_t>(i);
  }
  for (int shift = 0; shift < 2 * kBits; shift += kBits) {
    std::vector<size_t> start(kDigits + 1, 0);
    for (const uint32_t k : keys) ++start[((k >> shift) & (kDigits - 1)) + 1];
    for (uint32_t d = 0; d < kDigits; ++d) start[d + 1] += start[d];
    for (size_t i = 0; i < n; ++i) {
      const size_t to = start[(keys[i] >> shift) & (kDigits - 1)]++;
      keys2[to] = keys[i];
      order2[to] = order[i];
    }
    keys.swap(keys2);
    order.swap(order2);
  }
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
