#include "libcore/base/tensor.h"

#include "libcore/base/stream.h"

namespace tfm {

Shape::Shape(std::initializer_list<int64_t> dims) {
  TFM_REQUIRE(dims.size() <= kMaxRank, "tensor rank {} is over the limit of {}", dims.size(),
              kMaxRank);
  for (int64_t d : dims) {
    TFM_REQUIRE(d >= 0, "tensor dimension {} is negative", d);
    dims_[static_cast<size_t>(rank_++)] = d;
  }
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
  return n;
}

std::string Shape::str() const {
  std::string s = "(";
  for (int i = 0; i < rank_; ++i) s += fmt::format("{}{}", i ? ", " : "", dims_[static_cast<size_t>(i)]);
  return s + ")";
}

TensorView TensorView::reshape(Shape shape) const {
  TFM_REQUIRE(shape.numel() == numel(), "cannot view {} tensor as {}", shape_.str(), shape.str());
  return TensorView(data_, dtype_, shape, device_);
}

void TensorView::dtype_mismatch(DType wanted) const {
  fail("tensor {} read as {}", str(), dtype_name(wanted));
}

std::string TensorView::str() const {
  return fmt::format("{} {} on {}", dtype_name(dtype_), shape_.str(), device_.str());
}

Tensor::Tensor(Shape shape, DType dtype, Device device) {
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  view_ = TensorView(device_alloc(device, bytes), dtype, shape, device);
}

Tensor::~Tensor() { device_free(view_.device(), view_.data()); }

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    device_free(view_.device(), view_.data());
    view_ = std::exchange(other.view_, {});
  }
  return *this;
}

Tensor Tensor::zeros(Shape shape, DType dtype) { return zeros(shape, dtype, host_stream()); }

Tensor Tensor::zeros(Shape shape, DType dtype, const Stream& stream) {
  Tensor t(shape, dtype, stream.device());
  device_memset_zero(t.view_.data(), stream.device(), t.view_.bytes(), stream);
  return t;
}

void copy(const TensorView& dst, const TensorView& src, const Stream& stream) {
  TFM_REQUIRE(dst.shape() == src.shape() && dst.dtype() == src.dtype(),
              "copy: destination is {}, source is {}", dst.str(), src.str());
  device_copy(dst.data(), dst.device(), src.data(), src.device(), src.bytes(), stream);
}

void copy(const TensorView& dst, const TensorView& src) {
  TFM_REQUIRE(dst.device().is_cpu() && src.device().is_cpu(),
              "copy: from {} to {} needs the stream that orders it", src.device().str(),
              dst.device().str());
  copy(dst, src, host_stream());
}

}  // namespace tfm
