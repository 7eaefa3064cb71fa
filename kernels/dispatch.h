// What every op's validation and dispatch (kernels/FAMILY.cc) share: the
// checks of a call's tensors, and the one switch on the device. Checks that
// do not depend on the device live in the family files, so CPU and CUDA
// agree on what is legal. Not part of the op catalogue.
#pragma once

#include <initializer_list>
#include <utility>

#include "kernels/ops.h"
#include "libcore/base/device.h"
#include "libcore/base/error.h"
#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"

namespace tfm::ops {

// The one switch on the device: run.operator()<D>() with D the stream's
// device type, as in on_device(stream, [&]<DeviceType D> { impl::add<D>(a,
// b, y, stream); }). For CUDA the stream's device is made current first,
// here and nowhere else, so an op on cuda:1 never runs on device 0. A build
// without CUDA never names a CUDA implementation (it links without them)
// and answers a CUDA stream with "unsupported device: cuda (built without
// CUDA)".
template <typename Run>
void on_device(const Stream& stream, Run&& run) {
  switch (stream.device().type) {
    case DeviceType::cpu: return run.template operator()<DeviceType::cpu>();
    case DeviceType::cuda:
#ifdef TFM_WITH_CUDA
      activate(stream.device());
      return run.template operator()<DeviceType::cuda>();
#else
      fail_without_cuda();
#endif
  }
}

// The checks every family's validation shares. Each is an inline test,
// taken on every call of an op (on the decoder's small tensors a share of
// its time), and a cold function, out of line, that writes the message
// (dispatch.cc).
[[noreturn, gnu::cold]] void fail_device(const char* op, const Stream& stream, const char* name,
                                         const TensorView& t);
[[noreturn, gnu::cold]] void fail_float(const char* op, const TensorView& t, const char* name);
[[noreturn, gnu::cold]] void fail_same(const char* op, const TensorView& a, const char* an,
                                       const TensorView& b, const char* bn);
[[noreturn, gnu::cold]] void fail_shape(const char* op, const TensorView& t, const char* name,
                                        const Shape& want, const char* what);
[[noreturn, gnu::cold]] void fail_i32(const char* op, const TensorView& t, const char* name);
[[noreturn, gnu::cold]] void fail_param(const char* op, const TensorView& t, const char* name,
                                        const TensorView& x, const char* xname);
[[noreturn, gnu::cold]] void fail_stat(const char* op, const TensorView& t, const char* name,
                                       const TensorView& x, const char* xname);
[[noreturn, gnu::cold]] void fail_p(const char* op, float p);

// Every tensor of a call lives where its stream runs.
inline void require_device(
    const char* op, const Stream& stream,
    std::initializer_list<std::pair<const char*, const TensorView*>> tensors) {
  for (const auto& [name, t] : tensors)
    if ((t->empty() && t->numel() != 0) || t->device() != stream.device())
      fail_device(op, stream, name, *t);
}

// A float dtype the tensor's device computes in: f32 or f64 on the CPU;
// f32, bf16 or f16 on CUDA.
inline bool float_dtype_ok(DType t, Device d) {
  if (d.is_cpu()) return t == DType::f32 || t == DType::f64;
  return t == DType::f32 || t == DType::bf16 || t == DType::f16;
}
inline void require_float(const char* op, const TensorView& t, const char* name) {
  if (!float_dtype_ok(t.dtype(), t.device())) fail_float(op, t, name);
}

// The same shape and dtype.
inline void require_same(const char* op, const TensorView& a, const char* an, const TensorView& b,
                         const char* bn) {
  if (!(a.shape() == b.shape() && a.dtype() == b.dtype())) fail_same(op, a, an, b, bn);
}

inline void require_shape(const char* op, const TensorView& t, const char* name, const Shape& want,
                          const char* what) {
  if (!(t.shape() == want)) fail_shape(op, t, name, want, what);
}

inline void require_i32(const char* op, const TensorView& t, const char* name) {
  if (t.dtype() != DType::i32) fail_i32(op, t, name);
}

// A parameter or parameter gradient beside activation x: x's dtype, or f32
// on CUDA (fp32 master weights with bf16/f16 activations, ops.h).
inline void require_param(const char* op, const TensorView& t, const char* name,
                          const TensorView& x, const char* xname) {
  if (!(t.dtype() == x.dtype() || (x.device().is_cuda() && t.dtype() == DType::f32)))
    fail_param(op, t, name, x, xname);
}

// Saved statistics and sums: stats_dtype (ops.h).
inline void require_stat(const char* op, const TensorView& t, const char* name, const TensorView& x,
                         const char* xname) {
  if (t.dtype() != stats_dtype(x.dtype())) fail_stat(op, t, name, x, xname);
}

// A dropout probability, in [0, 1).
inline void require_p(const char* op, float p) {
  if (!(p >= 0.0f && p < 1.0f)) fail_p(op, p);
}

// Batch count of a (G..., R, C) tensor: the product of its leading dims.
inline int64_t batch_of(const TensorView& t) {
  int64_t g = 1;
  for (int i = 0; i + 2 < t.rank(); ++i) g *= t.dim(i);
  return g;
}

// Rows of an (R..., C) tensor: the product of every dimension but the last.
inline int64_t rows_of(const TensorView& t) {
  int64_t r = 1;
  for (int i = 0; i + 1 < t.rank(); ++i) r *= t.dim(i);
  return r;
}

}  // namespace tfm::ops
