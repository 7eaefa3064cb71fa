// Validation and dispatch of the decode ops (decode.h).
#include "kernels/decode.h"

#include "kernels/dispatch.h"

namespace tfm::ops {

void attention_gather(const TensorView& q, const TensorView& keys, const TensorView& values,
                      const TensorView& index, const TensorView& lengths,
                      const TensorView& groups, float scale, const TensorView& out,
                      const TensorView& probs, const Stream& stream) {
  const char* op = "attention_gather";
  require_device(op, stream, {{"q", &q}, {"keys", &keys}, {"values", &values}, {"index", &index},
                              {"lengths", &lengths}, {"groups", &groups}, {"out", &out}});
  require_float(op, q, "q");
  TFM_REQUIRE(q.rank() == 3, "{}: q is {} but must be (N, H, K)", op, q.str());
  const int64_t n = q.dim(0), h = q.dim(1), k = q.dim(2);
  TFM_REQUIRE(keys.rank() == 3 && keys.dim(1) == h && keys.dim(2) == k,
              "{}: keys is {} but must be (P, {}, {}) to match q", op, keys.str(), h, k);
  TFM_REQUIRE(values.rank() == 3 && values.dim(0) == keys.dim(0) && values.dim(1) == h,
              "{}: values is {} but must be ({}, {}, E) to match keys", op, values.str(),
              keys.dim(0), h);
  for (const auto& [t, name] : {std::pair{&keys, "keys"}, std::pair{&values, "values"},
                                std::pair{&out, "out"}})
    TFM_REQUIRE(t->dtype() == q.dtype(), "{}: {} is {} but q is {}", op, name, t->str(), q.str());
  require_shape(op, out, "out", Shape{n, h, values.dim(2)}, "N, H, E");
  require_i32(op, index, "index");
  require_i32(op, lengths, "lengths");
  require_i32(op, groups, "groups");
  TFM_REQUIRE(index.rank() == 2, "{}: index is {} but must be (G, L)", op, index.str());
  require_shape(op, lengths, "lengths", Shape{index.dim(0)}, "G");
  require_shape(op, groups, "groups", Shape{n}, "N");
  if (!probs.empty()) {
    require_device(op, stream, {{"probs", &probs}});
    require_shape(op, probs, "probs", Shape{n, h, index.dim(1)}, "N, H, L");
    require_stat(op, probs, "probs", q, "q");
  }
  if (n == 0 || out.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> {
    impl::attention_gather<D>(q, keys, values, index, lengths, groups, scale, out, probs, stream);
  });
}

void extend_history(const TensorView& prev, const TensorView& parents, const TensorView& positions,
                    const TensorView& slots, const TensorView& next, const TensorView& lengths,
                    const Stream& stream) {
  const char* op = "extend_history";
  require_device(op, stream, {{"prev", &prev}, {"parents", &parents}, {"positions", &positions},
                              {"slots", &slots}, {"next", &next}, {"lengths", &lengths}});
  for (const auto& [x, name] : {std::pair{&prev, "prev"}, std::pair{&parents, "parents"},
                                std::pair{&positions, "positions"}, std::pair{&slots, "slots"},
                                std::pair{&next, "next"}, std::pair{&lengths, "lengths"}})
    require_i32(op, *x, name);
  TFM_REQUIRE(prev.rank() == 2, "{}: prev is {} but must be (R, T)", op, prev.str());
  TFM_REQUIRE(next.data() != prev.data(), "{}: next is prev (the rows are permuted)", op);
  const int64_t n = parents.numel();
  TFM_REQUIRE(next.rank() == 2 && next.dim(0) >= n && next.dim(1) == prev.dim(1),
              "{}: next is {} but must be (R', T) with R' >= {} and T as prev {}", op, next.str(), n,
              prev.str());
  require_shape(op, parents, "parents", Shape{n}, "N");
  require_shape(op, positions, "positions", Shape{n}, "N");
  require_shape(op, slots, "slots", Shape{n}, "N");
  require_shape(op, lengths, "lengths", Shape{n}, "N");
  if (n == 0) return;
  on_device(stream, [&]<DeviceType D> {
    impl::extend_history<D>(prev, parents, positions, slots, next, lengths, stream);
  });
}

void log_softmax_topk(const TensorView& logits, const TensorView& values, const TensorView& ids,
                      const TensorView& lse, const Stream& stream) {
  const char* op = "log_softmax_topk";
  require_device(op, stream, {{"logits", &logits}, {"values", &values}, {"ids", &ids}, {"lse", &lse}});
  require_float(op, logits, "logits");
  TFM_REQUIRE(logits.rank() == 2 && logits.dim(1) > 0,
              "{}: logits is {} but must be (N, V) with V > 0", op, logits.str());
  const int64_t n = logits.dim(0), v = logits.dim(1);
  TFM_REQUIRE(values.rank() == 2 && values.dim(0) == n && values.dim(1) >= 1 && values.dim(1) <= v,
              "{}: values is {} but must be ({}, k) with 1 <= k <= {} (V)", op, values.str(), n, v);
  require_stat(op, values, "values", logits, "logits");
  require_i32(op, ids, "ids");
  require_shape(op, ids, "ids", values.shape(), "N, k");
  require_shape(op, lse, "lse", Shape{n}, "N");
  require_stat(op, lse, "lse", logits, "logits");
  if (n == 0) return;
  on_device(stream, [&]<DeviceType D> {
    impl::log_softmax_topk<D>(logits, values, ids, lse, stream);
  });
}

}  // namespace tfm::ops
