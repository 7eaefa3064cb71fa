// The messages of the checks every op's validation shares (dispatch.h):
// cold, out of line, reached only by a wrong call.
#include "kernels/dispatch.h"

namespace tfm::ops {

void fail_device(const char* op, const Stream& stream, const char* name, const TensorView& t) {
  if (t.empty() && t.numel() != 0) fail("{}: {} has no data", op, name);
  fail("{}: {} is on {} but the stream runs on {}", op, name, t.device().str(),
       stream.device().str());
}

void fail_float(const char* op, const TensorView& t, const char* name) {
  fail("{}: {} is {}, which {} does not support on {}", op, name, dtype_name(t.dtype()), op,
       t.device().is_cpu() ? "the cpu" : "cuda");
}

void fail_same(const char* op, const TensorView& a, const char* an, const TensorView& b,
               const char* bn) {
  fail("{}: {} is {} but {} is {}", op, an, a.str(), bn, b.str());
}

void fail_shape(const char* op, const TensorView& t, const char* name, const Shape& want,
                const char* what) {
  fail("{}: {} is {} but must be {} ({})", op, name, t.str(), want.str(), what);
}

void fail_i32(const char* op, const TensorView& t, const char* name) {
  fail("{}: {} is {} but must be i32", op, name, dtype_name(t.dtype()));
}

void fail_param(const char* op, const TensorView& t, const char* name, const TensorView& x,
                const char* xname) {
  fail("{}: {} is {} but {} is {} ({} must match it{})", op, name, dtype_name(t.dtype()), xname,
       dtype_name(x.dtype()), name, x.device().is_cuda() ? " or be f32" : "");
}

void fail_stat(const char* op, const TensorView& t, const char* name, const TensorView& x,
               const char* xname) {
  fail("{}: {} is {} but must be {} for {} {}", op, name, dtype_name(t.dtype()),
       dtype_name(stats_dtype(x.dtype())), dtype_name(x.dtype()), xname);
}

void fail_p(const char* op, float p) {
  fail("{}: dropout probability p = {} is outside [0, 1)", op, p);
}

}  // namespace tfm::ops
