#include "libcore/train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "libcore/base/error.h"
#include "libcore/base/stream.h"

namespace tfm {

double gradient_norm(const TensorView& grads, const Stream& stream) {
  const DType st = ops::stats_dtype(grads.dtype());
  Tensor sum({1}, st, grads.device());
  ops::sum_squares(grads, sum, stream);
  double host = 0;
  if (st == DType::f64) {
    copy(TensorView(&host, DType::f64, {1}), sum, stream);
  } else {
    float f = 0;
    copy(TensorView(&f, DType::f32, {1}), sum, stream);
    host = f;
  }
  return std::sqrt(host);
}

Adam::Adam(Shape shape, DType dtype, const Stream& stream, AdamConfig config)
    : config_(config), owned_m_(Tensor::zeros(shape, dtype, stream)),
      owned_v_(Tensor::zeros(shape, dtype, stream)), m_(owned_m_.view()), v_(owned_v_.view()) {}

Adam::Adam(TensorView m, TensorView v, AdamConfig config) : config_(config), m_(m), v_(v) {}

void Adam::step(const TensorView& params, const TensorView& grads, double lr, int64_t step,
                float grad_scale, const Stream& stream) {
  ops::AdamOptions o;
  o.lr = static_cast<float>(lr);
  o.beta1 = config_.beta1;
  o.beta2 = config_.beta2;
  o.eps = config_.eps;
  o.weight_decay = config_.weight_decay;
  o.step = step;
  o.grad_scale = grad_scale;
  ops::adam_step(params, grads, m_, v_, o, stream);
}

void Adam::step(const TensorView& params, const TensorView& grads, const TensorView& control,
                const Stream& stream) {
  ops::AdamOptions o;
  o.beta1 = config_.beta1;
  o.beta2 = config_.beta2;
  o.eps = config_.eps;
  o.weight_decay = config_.weight_decay;
  ops::adam_step(params, grads, m_, v_, o, stream, control);
}

ops::AdamSchedule Adam::schedule(double lr, int64_t step) const {
  return ops::adam_schedule(lr, config_.beta1, config_.beta2, step);
}

}  // namespace tfm
