// CPU GEMM family (gemm.h): OpenBLAS sgemm/dgemm per batch entry, with the
// bias and ReLU epilogue applied in the same pass over C where possible.
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/gemm_rows.h"
#include "kernels/gemm.h"

namespace tfm::ops::cpu {
namespace {

// m * n * k at or below which a batched GEMM runs its matrices in parallel.
constexpr int64_t kSmallGemm = 64 * 64 * 64;

template <typename T>
void call_blas(const Blas& blas, bool ta, bool tb, int m, int n, int k, T alpha, const T* a,
               int lda, const T* b, int ldb, T beta, T* c, int ldc) {
  const auto tra = ta ? CblasTrans : CblasNoTrans, trb = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    blas.sgemm(CblasRowMajor, tra, trb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    blas.dgemm(CblasRowMajor, tra, trb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename T>
void gemm_typed(const GemmShape& s, const T* a, const T* b, T* c, const T* bias,
                const GemmOptions& o) {
  const Blas& lib = blas();
  const int64_t rows = s.batch * s.m;  // C as one (G*M, N) matrix
  T beta = static_cast<T>(o.beta);
  if (bias && o.beta == 0.0f) {
    // C = bias rows, then accumulate the product onto them.
#pragma omp parallel for if (rows * s.n > (1 << 16))
    for (int64_t r = 0; r < rows; ++r) std::memcpy(c + r * s.n, bias, sizeof(T) * s.n);
    beta = 1;
  }
  // Many small matrices (attention's B*H heads): one thread per matrix
  // beats OpenBLAS splitting each tiny product. Only with the OpenMP build
  // of OpenBLAS, which runs single-threaded inside a parallel region.
  const bool small = s.m * s.n * s.k <= kSmallGemm;
  const bool by_batch = s.batch > 1 && small && lib.openmp;
#pragma omp parallel for schedule(static) if (by_batch)
  for (int64_t g = 0; g < s.batch; ++g) {
    call_blas<T>(lib, o.trans_a, o.trans_b, static_cast<int>(s.m), static_cast<int>(s.n),
                 static_cast<int>(s.k), static_cast<T>(o.alpha), a + g * s.stride_a,
                 static_cast<int>(s.lda), b + g * s.stride_b, static_cast<int>(s.ldb), beta,
                 c + g * s.stride_c, static_cast<int>(s.ldc));
  }
  const bool late_bias = bias && o.beta != 0.0f;
  if (!late_bias && !o.relu) return;
#pragma omp parallel for if (rows * s.n > (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    T* row = c + r * s.n;
    if (late_bias)
      for (int64_t j = 0; j < s.n; ++j) row[j] += bias[j];
    if (o.relu)
      for (int64_t j = 0; j < s.n; ++j) row[j] = std::max(row[j], T(0));
  }
}

}  // namespace
}  // namespace tfm::ops::cpu

namespace tfm::ops::impl {
using namespace cpu;  // the helpers above

template <>
void gemm<DeviceType::cpu>(const GemmShape& s, const TensorView& a, const TensorView& b,
                           const TensorView& c, const TensorView& bias, const GemmOptions& o,
                           const Stream&) {
  if (o.row_invariant && o.trans_b && !o.trans_a && s.batch == 1) {
    if (a.dtype() == DType::f32)
      return gemm_row_invariant<float>(s, a.data_as<float>(), b.data_as<float>(), c.data_as<float>(),
                                       bias.empty() ? nullptr : bias.data_as<float>(), o);
    if (a.dtype() == DType::f64)
      return gemm_row_invariant<double>(s, a.data_as<double>(), b.data_as<double>(),
                                        c.data_as<double>(),
                                        bias.empty() ? nullptr : bias.data_as<double>(), o);
  }
  for (int64_t d : {s.m, s.n, s.k, s.lda, s.ldb, s.ldc})
    TFM_REQUIRE(d <= INT_MAX, "gemm: dimension {} is over the CPU BLAS limit of {}", d, INT_MAX);
  switch (a.dtype()) {
    case DType::f32:
      return gemm_typed<float>(s, a.data_as<float>(), b.data_as<float>(), c.data_as<float>(),
                               bias.empty() ? nullptr : bias.data_as<float>(), o);
    case DType::f64:
      return gemm_typed<double>(s, a.data_as<double>(), b.data_as<double>(), c.data_as<double>(),
                                bias.empty() ? nullptr : bias.data_as<double>(), o);
    default:
      fail("gemm: {} is not supported on the cpu", dtype_name(a.dtype()));
  }
}

}  // namespace tfm::ops::impl
