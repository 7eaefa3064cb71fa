// Validation and dispatch of the embedding ops (embedding.h).
#include "kernels/embedding.h"

#include "kernels/dispatch.h"

namespace tfm::ops {

void embedding_forward(const TensorView& ids, const TensorView& table, float scale,
                       const TensorView& out, const Stream& stream) {
  const char* op = "embedding_forward";
  require_device(op, stream, {{"ids", &ids}, {"table", &table}, {"out", &out}});
  require_i32(op, ids, "ids");
  require_float(op, out, "out");
  TFM_REQUIRE(ids.rank() == 1, "{}: ids is {} but must be (N)", op, ids.str());
  TFM_REQUIRE(table.rank() == 2, "{}: table is {} but must be (V, D)", op, table.str());
  require_shape(op, out, "out", Shape{ids.dim(0), table.dim(1)}, "N, D");
  require_param(op, table, "table", out, "out");
  if (out.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> {
    impl::embedding_forward<D>(ids, table, scale, out, stream);
  });
}

void embedding_backward(const TensorView& ids, const TensorView& dout, float scale,
                        const TensorView& dtable, const Stream& stream) {
  const char* op = "embedding_backward";
  require_device(op, stream, {{"ids", &ids}, {"dout", &dout}, {"dtable", &dtable}});
  require_i32(op, ids, "ids");
  require_float(op, dout, "dout");
  TFM_REQUIRE(ids.rank() == 1, "{}: ids is {} but must be (N)", op, ids.str());
  TFM_REQUIRE(dtable.rank() == 2, "{}: dtable is {} but must be (V, D)", op, dtable.str());
  require_shape(op, dout, "dout", Shape{ids.dim(0), dtable.dim(1)}, "N, D");
  require_param(op, dtable, "dtable", dout, "dout");
  if (dout.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> {
    impl::embedding_backward<D>(ids, dout, scale, dtable, stream);
  });
}

namespace {
// Shared by position_add and position_backward: x (B, T, D), table (P, D).
void require_position(const char* op, const TensorView& x, const char* xname,
                      const TensorView& table, const char* tname, int64_t offset) {
  require_float(op, x, xname);
  TFM_REQUIRE(x.rank() == 3, "{}: {} is {} but must be (B, T, D)", op, xname, x.str());
  TFM_REQUIRE(table.rank() == 2 && table.dim(1) == x.dim(2),
              "{}: {} is {} but must be (P, {}) to match {}", op, tname, table.str(), x.dim(2),
              xname);
  require_param(op, table, tname, x, xname);
  TFM_REQUIRE(offset >= 0 && offset + x.dim(1) <= table.dim(0),
              "{}: positions {} to {} are outside the table's {} rows", op, offset,
              offset + x.dim(1) - 1, table.dim(0));
}
}  // namespace

void position_add(const TensorView& x, const TensorView& table, int64_t offset,
                  const Stream& stream) {
  require_device("position_add", stream, {{"x", &x}, {"table", &table}});
  require_position("position_add", x, "x", table, "table", offset);
  if (x.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> { impl::position_add<D>(x, table, offset, stream); });
}

void position_add_at(const TensorView& x, const TensorView& table, const TensorView& offset,
                     const Stream& stream) {
  const char* op = "position_add_at";
  require_device(op, stream, {{"x", &x}, {"table", &table}, {"offset", &offset}});
  require_i32(op, offset, "offset");
  TFM_REQUIRE(x.rank() == 3, "{}: x is {} but must be (B, T, D)", op, x.str());
  TFM_REQUIRE(offset.shape() == Shape{1} || offset.shape() == Shape{x.dim(0)},
              "{}: offset is {} but must be (1) or (B) = ({})", op, offset.str(), x.dim(0));
  if (stream.device().is_cpu()) {  // the offsets are readable here: checked as position_add's
    const int32_t* at = offset.data_as<int32_t>();
    for (int64_t b = 0; b < offset.numel(); ++b) require_position(op, x, "x", table, "table", at[b]);
  } else {
    require_position(op, x, "x", table, "table", 0);
  }
  if (x.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> { impl::position_add_at<D>(x, table, offset, stream); });
}

void position_backward(const TensorView& dx, int64_t offset, const TensorView& dtable,
                       const Stream& stream) {
  require_device("position_backward", stream, {{"dx", &dx}, {"dtable", &dtable}});
  require_position("position_backward", dx, "dx", dtable, "dtable", offset);
  if (dx.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> { impl::position_backward<D>(dx, offset, dtable, stream); });
}

}  // namespace tfm::ops
