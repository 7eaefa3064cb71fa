// Validation and dispatch of the attention ops (attention.h).
#include "kernels/attention.h"

#include "kernels/dispatch.h"

namespace tfm::ops {

void permute_0213(const TensorView& x, const TensorView& y, const Stream& stream) {
  require_device("permute_0213", stream, {{"x", &x}, {"y", &y}});
  require_float("permute_0213", x, "x");
  TFM_REQUIRE(x.rank() == 4, "permute_0213: x is {} but must be (A, B, C, D)", x.str());
  require_shape("permute_0213", y, "y", Shape{x.dim(0), x.dim(2), x.dim(1), x.dim(3)},
                "A, C, B, D");
  TFM_REQUIRE(y.dtype() == x.dtype(), "permute_0213: x is {} but y is {}", x.str(), y.str());
  TFM_REQUIRE(x.data() != y.data() || x.numel() == 0, "permute_0213: y must not be x itself");
  if (x.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> { impl::permute_0213<D>(x, y, stream); });
}

namespace {
// rows (N, H * X) and heads (B, H, L, X) of one dtype; offsets (B + 1) i32.
void require_packing(const char* op, const TensorView& rows, const TensorView& offsets,
                     const TensorView& heads, int64_t col) {
  require_float(op, rows, "rows");
  TFM_REQUIRE(heads.rank() == 4, "{}: heads is {} but must be (B, H, L, X)", op, heads.str());
  TFM_REQUIRE(col >= 0 && rows.rank() == 2 && rows.dim(1) >= col + heads.dim(1) * heads.dim(3),
              "{}: rows is {} but must be (N, W) with W >= col + H * X = {} + {}", op, rows.str(),
              col, heads.dim(1) * heads.dim(3));
  TFM_REQUIRE(rows.dtype() == heads.dtype(), "{}: rows is {} but heads is {}", op, rows.str(),
              heads.str());
  TFM_REQUIRE(rows.dim(0) <= heads.dim(0) * heads.dim(2),
              "{}: {} rows do not fit {} sentences of at most {}", op, rows.dim(0), heads.dim(0),
              heads.dim(2));
  require_i32(op, offsets, "offsets");
  require_shape(op, offsets, "offsets", Shape{heads.dim(0) + 1}, "B + 1");
}
}  // namespace

void unpack_heads(const TensorView& rows, const TensorView& offsets, const TensorView& heads,
                  const Stream& stream, int64_t col) {
  require_device("unpack_heads", stream, {{"rows", &rows}, {"offsets", &offsets}, {"heads", &heads}});
  require_packing("unpack_heads", rows, offsets, heads, col);
  if (heads.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> {
    impl::unpack_heads<D>(rows, offsets, heads, col, stream);
  });
}

void pack_heads(const TensorView& heads, const TensorView& offsets, const TensorView& rows,
                const Stream& stream, int64_t col) {
  require_device("pack_heads", stream, {{"heads", &heads}, {"offsets", &offsets}, {"rows", &rows}});
  require_packing("pack_heads", rows, offsets, heads, col);
  if (rows.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> { impl::pack_heads<D>(heads, offsets, rows, col, stream); });
}

void masked_softmax_forward(const TensorView& scores, const TensorView& k_lengths, bool causal,
                            const TensorView& probs, const Stream& stream) {
  const char* op = "masked_softmax_forward";
  require_device(op, stream, {{"scores", &scores}, {"k_lengths", &k_lengths}, {"probs", &probs}});
  require_float(op, scores, "scores");
  TFM_REQUIRE(scores.rank() == 4, "{}: scores is {} but must be (B, H, Tq, Tk)", op, scores.str());
  require_same(op, scores, "scores", probs, "probs");
  require_i32(op, k_lengths, "k_lengths");
  require_shape(op, k_lengths, "k_lengths", Shape{scores.dim(0)}, "B");
  if (scores.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> {
    impl::masked_softmax_forward<D>(scores, k_lengths, causal, probs, stream);
  });
}

void masked_softmax_backward(const TensorView& probs, const TensorView& dprobs, const TensorView& dscores,
                             const Stream& stream) {
  const char* op = "masked_softmax_backward";
  require_device(op, stream, {{"probs", &probs}, {"dprobs", &dprobs}, {"dscores", &dscores}});
  require_float(op, probs, "probs");
  TFM_REQUIRE(probs.rank() == 4, "{}: probs is {} but must be (B, H, Tq, Tk)", op, probs.str());
  require_same(op, probs, "probs", dprobs, "dprobs");
  require_same(op, probs, "probs", dscores, "dscores");
  if (probs.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> {
    impl::masked_softmax_backward<D>(probs, dprobs, dscores, stream);
  });
}

}  // namespace tfm::ops
