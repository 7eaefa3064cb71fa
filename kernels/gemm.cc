// Validation and dispatch of the gemm ops (gemm.h).
#include "kernels/gemm.h"

#include "kernels/cpu/blas.h"
#include "kernels/cpu/gemm_rows.h"
#include "kernels/dispatch.h"

namespace tfm::ops {

void gemm(const TensorView& a, const TensorView& b, const TensorView& c, const GemmOptions& o,
          const Stream& stream, const TensorView& bias) {
  require_device("gemm", stream, {{"A", &a}, {"B", &b}, {"C", &c}});
  TFM_REQUIRE(a.rank() >= 2 && b.rank() >= 2 && c.rank() >= 2,
              "gemm: A, B and C must be matrices or batches of them, got {}, {} and {}",
              a.shape().str(), b.shape().str(), c.shape().str());
  impl::GemmShape s;
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

  on_device(stream, [&]<DeviceType D> { impl::gemm<D>(s, a, b, c, bias, o, stream); });
}

int64_t panels_floats(int64_t rows, int64_t cols) { return cpu::panels_size(rows, cols); }

void pack_panels(const TensorView& w, float* panels) {
  TFM_REQUIRE(w.device().is_cpu() && w.dtype() == DType::f32 && w.rank() == 2,
              "pack_panels: w is {} {} on {}, but must be an f32 matrix on the CPU", dtype_name(w.dtype()),
              w.shape().str(), w.device().str());
  cpu::pack_panels(static_cast<const float*>(w.data()), w.dim(0), w.dim(1), panels);
}

size_t library_memory_bytes(Device device) {
  return device.is_cpu() ? cpu::blas_buffer_bytes() : 0;
}

void check_library_memory(Device device) {
  if (device.is_cpu()) cpu::check_blas_memory();
}

}  // namespace tfm::ops
