// CPU elementwise ops (elementwise.h): add, ReLU and the activations
// forward/backward, Philox uniform.
// One templated loop each, run in f32 or f64; OpenMP splits large tensors.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/common.h"
#include "kernels/cpu/vector.h"
#include "kernels/elementwise.h"

namespace tfm::ops::cpu {
namespace {

constexpr int64_t kChunk = 1 << 14;  // elements per unit of parallel work

template <typename T>
TFM_CPU_CLONES void add_span(const T* a, const T* b, T* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

template <typename T>
TFM_CPU_CLONES void relu_span(const T* x, T* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < T(0) ? T(0) : x[i];  // NaN stays NaN
}

template <typename T>
TFM_CPU_CLONES void relu_backward_span(const T* y, const T* dy, T* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
}

// act(x) and act'(x) in T (float or double): the formulas of elementwise.h.
template <typename T>
T activation(Activation act, T x) {
  switch (act) {
    case Activation::relu: return x < T(0) ? T(0) : x;
    case Activation::gelu: return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
    case Activation::silu: return x / (T(1) + std::exp(-x));
  }
  return x;
}
template <typename T>
T activation_slope(Activation act, T x) {
  switch (act) {
    case Activation::relu: return x > T(0) ? T(1) : T(0);
    case Activation::gelu: {
      const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
      const T pdf = std::exp(T(-0.5) * x * x) * T(0.39894228040143267794);  // 1 / sqrt(2 pi)
      return cdf + x * pdf;
    }
    case Activation::silu: {
      const T s = T(1) / (T(1) + std::exp(-x));
      return s * (T(1) + x * (T(1) - s));
    }
  }
  return T(1);
}

// Every float dtype as double and back (tfm::bf16 / f16 round to nearest even).
double load(const TensorView& t, int64_t i) {
  switch (t.dtype()) {
    case DType::f32: return static_cast<const float*>(t.data())[i];
    case DType::f64: return static_cast<const double*>(t.data())[i];
    case DType::bf16: return static_cast<float>(static_cast<const bf16*>(t.data())[i]);
    case DType::f16: return static_cast<float>(static_cast<const f16*>(t.data())[i]);
    default: return 0;
  }
}
void store(const TensorView& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::f32: static_cast<float*>(t.data())[i] = static_cast<float>(v); break;
    case DType::f64: static_cast<double*>(t.data())[i] = v; break;
    // Through float first: the same rounding as the GPU's __float2bfloat16_rn
    // of an f32 value (f64 sources are rare: tests only).
    case DType::bf16: static_cast<bf16*>(t.data())[i] = bf16(static_cast<float>(v)); break;
    case DType::f16: static_cast<f16*>(t.data())[i] = f16(static_cast<float>(v)); break;
    default: break;
  }
}

}  // namespace
}  // namespace tfm::ops::cpu

namespace tfm::ops::impl {
using namespace cpu;  // the helpers above

template <>
void add<DeviceType::cpu>(const TensorView& a, const TensorView& b, const TensorView& y,
                          const Stream&) {
  with_float(y, "add", [&](auto* py) {
    using T = std::remove_pointer_t<decltype(py)>;
    const T* pa = a.data_as<T>();
    const T* pb = b.data_as<T>();
    parallel_chunks(y.numel(), kChunk, [&](int64_t i0, int64_t i1) {
      add_span<T>(pa + i0, pb + i0, py + i0, i1 - i0);
    });
  });
}

template <>
void scaled_difference<DeviceType::cpu>(const TensorView& x, const TensorView& base, float w, const TensorView& y,
                                        const Stream&) {
  with_float(y, "scaled_difference", [&](auto* py) {
    using T = std::remove_pointer_t<decltype(py)>;
    const T* px = x.data_as<T>();
    const T* pb = base.data_as<T>();
    const T tw = static_cast<T>(w);
    parallel_chunks(y.numel(), kChunk, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) py[i] = tw * (px[i] - pb[i]);
    });
  });
}

template <>
void relu_forward<DeviceType::cpu>(const TensorView& x, const TensorView& y, const Stream&) {
  with_float(y, "relu_forward", [&](auto* py) {
    using T = std::remove_pointer_t<decltype(py)>;
    const T* px = x.data_as<T>();
    parallel_chunks(y.numel(), kChunk, [&](int64_t i0, int64_t i1) {
      relu_span<T>(px + i0, py + i0, i1 - i0);
    });
  });
}

template <>
void relu_backward<DeviceType::cpu>(const TensorView& y, const TensorView& dy, const TensorView& dx,
                                    const Stream&) {
  with_float(dx, "relu_backward", [&](auto* pdx) {
    using T = std::remove_pointer_t<decltype(pdx)>;
    const T* py = y.data_as<T>();
    const T* pdy = dy.data_as<T>();
    parallel_chunks(dx.numel(), kChunk, [&](int64_t i0, int64_t i1) {
      relu_backward_span<T>(py + i0, pdy + i0, pdx + i0, i1 - i0);
    });
  });
}

template <>
void activation_forward<DeviceType::cpu>(const TensorView& x, Activation act, const TensorView& y,
                                         const Stream&) {
  with_float(y, "activation_forward", [&](auto* py) {
    using T = std::remove_pointer_t<decltype(py)>;
    const T* px = x.data_as<T>();
    parallel_chunks(y.numel(), kChunk, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) py[i] = activation(act, px[i]);
    });
  });
}

template <>
void activation_backward<DeviceType::cpu>(const TensorView& x, const TensorView& dy, Activation act,
                                          const TensorView& dx, const Stream&) {
  with_float(dx, "activation_backward", [&](auto* pdx) {
    using T = std::remove_pointer_t<decltype(pdx)>;
    const T* px = x.data_as<T>();
    const T* pdy = dy.data_as<T>();
    parallel_chunks(dx.numel(), kChunk, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) pdx[i] = pdy[i] * activation_slope(act, px[i]);
    });
  });
}

template <>
void cast<DeviceType::cpu>(const TensorView& x, const TensorView& y, const Stream&) {
  const int64_t n = x.numel();
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) store(y, i, load(x, i));
}

template <>
void copy_columns<DeviceType::cpu>(const TensorView& x, int64_t col, const TensorView& y,
                                   const Stream&) {
  const size_t el = dtype_size(x.dtype()), width = static_cast<size_t>(y.dim(1)) * el;
  const auto* src = static_cast<const char*>(x.data()) + col * static_cast<int64_t>(el);
  auto* dst = static_cast<char*>(y.data());
  for (int64_t r = 0; r < y.dim(0); ++r)
    std::memcpy(dst + static_cast<size_t>(r) * width, src + static_cast<size_t>(r * x.dim(1)) * el, width);
}

template <>
void scatter_columns<DeviceType::cpu>(const TensorView& x, int64_t col, const TensorView& index,
                                      const TensorView& y, const Stream&) {
  const int32_t* to = index.data_as<int32_t>();
  for (int64_t r = 0; r < x.dim(0); ++r)
    TFM_REQUIRE(to[r] >= 0 && to[r] < y.dim(0), "scatter_columns: index[{}] is {}, outside [0, {})", r,
                to[r], y.dim(0));
  const size_t el = dtype_size(x.dtype()), width = static_cast<size_t>(y.dim(1)) * el;
  const auto* src = static_cast<const char*>(x.data()) + col * static_cast<int64_t>(el);
  auto* dst = static_cast<char*>(y.data());
  for (int64_t r = 0; r < x.dim(0); ++r)
    std::memcpy(dst + static_cast<size_t>(to[r]) * width, src + static_cast<size_t>(r * x.dim(1)) * el, width);
}

template <>
void uniform<DeviceType::cpu>(const TensorView& out, const RngKey& key, float lo, float hi,
                              const Stream&) {
  with_float(out, "uniform", [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    const int64_t n = out.numel();
    const int64_t blocks = (n + 3) / 4;
    const float span = hi - lo;
#pragma omp parallel for if (n > kParallelMin)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const Philox4 r = philox_block(key, static_cast<uint64_t>(blk));
      for (int64_t lane = 0; lane < 4 && blk * 4 + lane < n; ++lane)
        p[blk * 4 + lane] = static_cast<T>(uniform_in(r.v[lane], lo, span));
    }
  });
}

}  // namespace tfm::ops::impl
