// Validation and the one dispatch switch of every op (ops.h). Checks that do
// not depend on the device live here, so CPU and CUDA agree on what is legal.
#include "kernels/ops.h"

#include <initializer_list>

#include "kernels/detail.h"

namespace tfm::ops {
namespace {

#ifdef TFM_WITH_CUDA
#define TFM_CUDA_DISPATCH(call) return cuda::call
#else
#define TFM_CUDA_DISPATCH(call) fail("unsupported device: cuda (built without CUDA)")
#endif

// Every tensor of a call lives where its stream runs.
void require_device(const char* op, const Stream& stream,
                    std::initializer_list<std::pair<const char*, const TensorView*>> tensors) {
  for (const auto& [name, t] : tensors) {
    if (t->empty() && t->numel() != 0) fail("{}: {} has no data", op, name);
    TFM_REQUIRE(t->device() == stream.device(), "{}: {} is on {} but the stream runs on {}", op,
                name, t->device().str(), stream.device().str());
  }
}

bool float_dtype_ok(DType t, Device d) {
  if (d.is_cpu()) return t == DType::f32 || t == DType::f64;
  return t == DType::f32 || t == DType::bf16 || t == DType::f16;
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

// Batch count of a (G..., R, C) tensor: the product of its leading dims.
int64_t batch_of(const TensorView& t) {
  int64_t g = 1;
  for (int i = 0; i + 2 < t.rank(); ++i) g *= t.dim(i);
  return g;
}

}  // namespace

void gemm(const TensorView& a, const TensorView& b, const TensorView& c, const GemmOptions& o,
          const Stream& stream, const TensorView& bias) {
  require_device("gemm", stream, {{"A", &a}, {"B", &b}, {"C", &c}});
  TFM_REQUIRE(a.rank() >= 2 && b.rank() >= 2 && c.rank() >= 2,
              "gemm: A, B and C must be matrices or batches of them, got {}, {} and {}",
              a.shape().str(), b.shape().str(), c.shape().str());
  detail::GemmShape s;
  s.m = o.trans_a ? a.dim(-1) : a.dim(-2);
  s.k = o.trans_a ? a.dim(-2) : a.dim(-1);
  const int64_t kb = o.trans_b ? b.dim(-1) : b.dim(-2);
  s.n = o.trans_b ? b.dim(-2) : b.dim(-1);
  TFM_REQUIRE(kb == s.k, "gemm: op(A) is {} x {} but op(B) is {} x {} (A {}{}, B {}{})", s.m, s.k,
              kb, s.n, a.shape().str(), o.trans_a ? "^T" : "", b.shape().str(),
              o.trans_b ? "^T" : "");
  TFM_REQUIRE(s.k > 0, "gemm: the inner dimension K is 0 (A {}, B {})", a.shape().str(),
              b.shape().str());
  TFM_REQUIRE(c.dim(-2) == s.m && c.dim(-1) == s.n, "gemm: C is {} but op(A) op(B) is {} x {}",
              c.shape().str(), s.m, s.n);
  s.batch = batch_of(c);
  const int64_t ga = batch_of(a), gb = batch_of(b);
  TFM_REQUIRE(ga == s.batch || (a.rank() == 2), "gemm: A holds {} matrices but C holds {}", ga,
              s.batch);
  TFM_REQUIRE(gb == s.batch || (b.rank() == 2), "gemm: B holds {} matrices but C holds {}", gb,
              s.batch);
  s.lda = a.dim(-1);
  s.ldb = b.dim(-1);
  s.ldc = c.dim(-1);
  s.stride_a = a.rank() == 2 ? 0 : a.dim(-2) * a.dim(-1);
  s.stride_b = b.rank() == 2 ? 0 : b.dim(-2) * b.dim(-1);
  s.stride_c = s.m * s.n;

  require_float("gemm", a, "A");
  TFM_REQUIRE(b.dtype() == a.dtype(), "gemm: A is {} but B is {}", dtype_name(a.dtype()),
              dtype_name(b.dtype()));
  TFM_REQUIRE(c.dtype() == a.dtype() || (stream.device().is_cuda() && c.dtype() == DType::f32),
              "gemm: C is {} but A and B are {} (C must match them{})", dtype_name(c.dtype()),
              dtype_name(a.dtype()), stream.device().is_cuda() ? " or be f32" : "");
  if (!bias.empty()) {
    require_device("gemm", stream, {{"bias", &bias}});
    TFM_REQUIRE(bias.rank() == 1 && bias.dim(0) == s.n, "gemm: bias is {} but C has {} columns",
                bias.shape().str(), s.n);
    TFM_REQUIRE(bias.dtype() == c.dtype(), "gemm: bias is {} but C is {}", dtype_name(bias.dtype()),
                dtype_name(c.dtype()));
  }
  if (s.m == 0 || s.n == 0 || s.batch == 0) return;

  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::gemm(s, a, b, c, bias, o);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(gemm(s, a, b, c, bias, o, stream));
  }
}

void add(const TensorView& a, const TensorView& b, const TensorView& y, const Stream& stream) {
  require_device("add", stream, {{"a", &a}, {"b", &b}, {"y", &y}});
  require_float("add", a, "a");
  require_same("add", a, "a", b, "b");
  require_same("add", a, "a", y, "y");
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::add(a, b, y);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(add(a, b, y, stream));
  }
}

void relu_forward(const TensorView& x, const TensorView& y, const Stream& stream) {
  require_device("relu_forward", stream, {{"x", &x}, {"y", &y}});
  require_float("relu_forward", x, "x");
  require_same("relu_forward", x, "x", y, "y");
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::relu_forward(x, y);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(relu_forward(x, y, stream));
  }
}

void relu_backward(const TensorView& y, const TensorView& dy, const TensorView& dx,
                   const Stream& stream) {
  require_device("relu_backward", stream, {{"y", &y}, {"dy", &dy}, {"dx", &dx}});
  require_float("relu_backward", y, "y");
  require_same("relu_backward", y, "y", dy, "dy");
  require_same("relu_backward", y, "y", dx, "dx");
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::relu_backward(y, dy, dx);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(relu_backward(y, dy, dx, stream));
  }
}

void uniform(const TensorView& out, const RngKey& key, float lo, float hi, const Stream& stream) {
  require_device("uniform", stream, {{"out", &out}});
  require_float("uniform", out, "out");
  TFM_REQUIRE(lo <= hi, "uniform: lo {} is above hi {}", lo, hi);
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::uniform(out, key, lo, hi);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(uniform(out, key, lo, hi, stream));
  }
}

}  // namespace tfm::ops
