// Shared by the CPU op files: the size below which a loop stays on one
// thread, and the dispatch from a float tensor to its element type.
#pragma once

#include <algorithm>
#include <cstdint>

#include "libcore/base/error.h"
#include "libcore/base/tensor.h"

namespace tfm::ops::cpu {

// Below this many elements an OpenMP parallel region costs more than it saves.
inline constexpr int64_t kParallelMin = 1 << 15;

// f(begin, end) over [0, n) in chunks of `chunk`, the chunks spread over the
// OpenMP threads when n is large enough to pay for them.
template <typename F>
void parallel_chunks(int64_t n, int64_t chunk, F&& f) {
  const int64_t chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t c = 0; c < chunks; ++c) f(c * chunk, std::min(n, (c + 1) * chunk));
}

// Calls f(T*) with the tensor's typed pointer: f32 or f64, the CPU's float
// dtypes (kernels/NAME.cc has already checked the call; this names the op
// otherwise).
template <typename F>
void with_float(const TensorView& t, const char* op, F&& f) {
  switch (t.dtype()) {
    case DType::f32: return f(static_cast<float*>(t.data()));
    case DType::f64: return f(static_cast<double*>(t.data()));
    default: fail("{}: {} is not supported on the cpu", op, dtype_name(t.dtype()));
  }
}

}  // namespace tfm::ops::cpu
