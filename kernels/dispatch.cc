// The checks every op's validation shares (dispatch.h).
#include "kernels/dispatch.h"

#include "kernels/ops.h"

namespace tfm::ops {
namespace {

bool float_dtype_ok(DType t, Device d) {
  if (d.is_cpu()) return t == DType::f32 || t == DType::f64;
  return t == DType::f32 || t == DType::bf16 || t == DType::f16;
}

}  // namespace

void require_device(const char* op, const Stream& stream,
                    std::initializer_list<std::pair<const char*, const TensorView*>> tensors) {
  for (const auto& [name, t] : tensors) {
    if (t->empty() && t->numel() != 0) fail("{}: {} has no data", op, name);
    TFM_REQUIRE(t->device() == stream.device(), "{}: {} is on {} but the stream runs on {}", op,
                name, t->device().str(), stream.device().str());
  }
}

void require_float(const char* op, const TensorView& t, const char* name) {
  TFM_REQUIRE(float_dtype_ok(t.dtype(), t.device()), "{}: {} is {}, which {} does not support on {}",
              op, name, dtype_name(t.dtype()), op, t.device().is_cpu() ? "the cpu" : "cuda");
}

void require_same(const char* op, const TensorView& a, const char* an, const TensorView& b,
                  const char* bn) {
  TFM_REQUIRE(a.shape() == b.shape() && a.dtype() == b.dtype(), "{}: {} is {} but {} is {}", op,
              an, a.str(), bn, b.str());
}

void require_shape(const char* op, const TensorView& t, const char* name, const Shape& want,
                   const char* what) {
  TFM_REQUIRE(t.shape() == want, "{}: {} is {} but must be {} ({})", op, name, t.str(),
              want.str(), what);
}

void require_i32(const char* op, const TensorView& t, const char* name) {
  TFM_REQUIRE(t.dtype() == DType::i32, "{}: {} is {} but must be i32", op, name,
              dtype_name(t.dtype()));
}

void require_param(const char* op, const TensorView& t, const char* name, const TensorView& x,
                   const char* xname) {
  TFM_REQUIRE(t.dtype() == x.dtype() || (x.device().is_cuda() && t.dtype() == DType::f32),
              "{}: {} is {} but {} is {} ({} must match it{})", op, name, dtype_name(t.dtype()),
              xname, dtype_name(x.dtype()), name, x.device().is_cuda() ? " or be f32" : "");
}

void require_stat(const char* op, const TensorView& t, const char* name, const TensorView& x,
                  const char* xname) {
  const DType want = stats_dtype(x.dtype());
  TFM_REQUIRE(t.dtype() == want, "{}: {} is {} but must be {} for {} {}", op, name,
              dtype_name(t.dtype()), dtype_name(want), dtype_name(x.dtype()), xname);
}

void require_p(const char* op, float p) {
  TFM_REQUIRE(p >= 0.0f && p < 1.0f, "{}: dropout probability p = {} is outside [0, 1)", op, p);
}

}  // namespace tfm::ops
