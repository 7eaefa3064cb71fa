// Shared by the CPU op files: the size below which a loop stays on one
// thread, and the dispatch from a float tensor to its element type.
#pragma once

#include <cstdint>

#include "libcore/error.h"
#include "libcore/tensor.h"

namespace tfm::ops::cpu {

// Below this many elements an OpenMP parallel region costs more than it saves.
inline constexpr int64_t kParallelMin = 1 << 15;

// Calls f(T*) with the tensor's typed pointer: f32 or f64, the CPU's float
// dtypes (ops.cc has already checked the call; this names the op otherwise).
template <typename F>
void with_float(const TensorView& t, const char* op, F&& f) {
  switch (t.dtype()) {
    case DType::f32: return f(static_cast<float*>(t.data()));
    case DType::f64: return f(static_cast<double*>(t.data()));
    default: fail("{}: {} is not supported on the cpu", op, dtype_name(t.dtype()));
  }
}

}  // namespace tfm::ops::cpu
