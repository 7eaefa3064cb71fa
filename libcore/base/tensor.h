// Tensors: a non-owning view (TensorView) that ops take, and an owning
// Tensor for programs and tests. Views are dense and row-major: the last
// dimension is contiguous. Shapes are written with one alphabet throughout
// tfm: B batch, S source length, T target length, D d_model,
// H heads, K d_k, E d_v, F d_ff, V vocabulary, L layers, W beam.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "libcore/base/device.h"
#include "libcore/base/dtype.h"
#include "libcore/base/error.h"

namespace tfm {

class Stream;

class Shape {
 public:
  static constexpr int kMaxRank = 6;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i < 0 ? i + rank_ : i)]; }
  int64_t numel() const;
  std::string str() const;  // "(7, 5)"
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }
  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i)
      if (a.dims_[static_cast<size_t>(i)] != b.dims_[static_cast<size_t>(i)]) return false;
    return true;
  }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

class TensorView {
 public:
  TensorView() = default;
  TensorView(void* data, DType dtype, Shape shape, Device device = Device::cpu())
      : data_(data), dtype_(dtype), shape_(shape), device_(device) {}

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    if (dtype_of<T> != dtype_) dtype_mismatch(dtype_of<T>);
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  Device device() const { return device_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t numel() const { return shape_.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool empty() const { return data_ == nullptr; }

  // Same data seen with another shape of the same element count.
  TensorView reshape(Shape shape) const;
  // "f32 (7, 5) on cpu", for error messages.
  std::string str() const;

 private:
  [[noreturn]] void dtype_mismatch(DType wanted) const;

  void* data_ = nullptr;
  DType dtype_ = DType::f32;
  Shape shape_;
  Device device_;
};

// An owning, dense tensor. Move-only; the memory goes back on destruction.
class Tensor {
 public:
  Tensor() = default;
  Tensor(Shape shape, DType dtype, Device device = Device::cpu());
  ~Tensor();
  Tensor(Tensor&& other) noexcept : view_(std::exchange(other.view_, {})) {}
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // Zeros on the CPU, or on the stream's device in the stream's order.
  static Tensor zeros(Shape shape, DType dtype);
  static Tensor zeros(Shape shape, DType dtype, const Stream& stream);

  const TensorView& view() const { return view_; }
  operator const TensorView&() const { return view_; }  // NOLINT: ops take views
  template <typename T>
  T* data_as() const { return view_.data_as<T>(); }
  const Shape& shape() const { return view_.shape(); }
  DType dtype() const { return view_.dtype(); }
  Device device() const { return view_.device(); }
  int64_t numel() const { return view_.numel(); }

 private:
  TensorView view_;
};

// dst = src, across devices, in the order of `stream` (on the device side's
// device); shapes and dtypes must match. What has happened on return is
// device_copy's contract (device.h): a copy to the CPU is complete, a
// copy from the CPU has taken its source.
void copy(const TensorView& dst, const TensorView& src, const Stream& stream);
// dst = src between two CPU tensors; a device tensor is an error (say
// which stream orders the copy: the overload above).
void copy(const TensorView& dst, const TensorView& src);

}  // namespace tfm
