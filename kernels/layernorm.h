// Layer norm, alone and fused with the residual and dropout.
// Part of the op catalogue: kernels/ops.h gives the contract every op keeps.
#pragma once

#include "libcore/base/rng.h"
#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"

namespace tfm::ops {

// ------------------------------------------------------------------- layernorm
// Over the last dimension D of (R, D); mean and rstd = 1 / sqrt(var + eps)
// (biased variance) are (R) in f32 (f64 when x is f64), saved for backward.
// gamma and beta are (D), of x's dtype or (on CUDA) f32.

// y = gamma * (x - mean) * rstd + beta                 (y =, mean =, rstd =)
void layernorm_forward(const TensorView& x, const TensorView& gamma, const TensorView& beta,
                       float eps, const TensorView& y, const TensorView& mean,
                       const TensorView& rstd, const Stream& stream);

// xhat = (x - mean) * rstd, g = gamma * dy:
// dx = rstd * (g - mean_D(g) - xhat * mean_D(g * xhat))      (dx =; dx may be dy)
// dgamma += sum_R dy * xhat;  dbeta += sum_R dy
void layernorm_backward(const TensorView& x, const TensorView& gamma, const TensorView& mean,
                        const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                        const TensorView& dgamma, const TensorView& dbeta, const Stream& stream);

// The post-norm sub-layer end, fused: h = residual + dropout(s); y = LayerNorm(h)
// residual, s, h, y (R, D); saves h, mean, rstd          (h =, y =, mean =, rstd =)
void add_dropout_layernorm_forward(const TensorView& residual, const TensorView& s, float p,
                                   const RngKey& key, const TensorView& gamma,
                                   const TensorView& beta, float eps, const TensorView& h,
                                   const TensorView& y, const TensorView& mean,
                                   const TensorView& rstd, const Stream& stream);

// Its backward: dh = layer-norm backward of dy (the residual's gradient),
// ds = dropout_backward(dh)            (dh =, ds =; dgamma +=, dbeta +=; dh may be dy)
void add_dropout_layernorm_backward(const TensorView& h, const TensorView& gamma,
                                    const TensorView& mean, const TensorView& rstd,
                                    const TensorView& dy, float p, const RngKey& key,
                                    const TensorView& dh, const TensorView& ds,
                                    const TensorView& dgamma, const TensorView& dbeta,
                                    const Stream& stream);

}  // namespace tfm::ops

// The devices' implementations, declared once for both: layernorm.cc calls
// impl::OP<D> through on_device once a call is valid; cpu/layernorm.cc and
// cuda/layernorm.cu define the specializations. Not for callers.
namespace tfm::ops::impl {

template <DeviceType D>
void layernorm_forward(const TensorView& x, const TensorView& gamma, const TensorView& beta,
                       float eps, const TensorView& y, const TensorView& mean,
                       const TensorView& rstd, const Stream& stream);
template <DeviceType D>
void layernorm_backward(const TensorView& x, const TensorView& gamma, const TensorView& mean,
                        const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                        const TensorView& dgamma, const TensorView& dbeta, const Stream& stream);
template <DeviceType D>
void add_dropout_layernorm_forward(const TensorView& residual, const TensorView& s, float p,
                                   const RngKey& key, const TensorView& gamma,
                                   const TensorView& beta, float eps, const TensorView& h,
                                   const TensorView& y, const TensorView& mean,
                                   const TensorView& rstd, const Stream& stream);
template <DeviceType D>
void add_dropout_layernorm_backward(const TensorView& h, const TensorView& gamma,
                                    const TensorView& mean, const TensorView& rstd,
                                    const TensorView& dy, float p, const RngKey& key,
                                    const TensorView& dh, const TensorView& ds,
                                    const TensorView& dgamma, const TensorView& dbeta,
                                    const Stream& stream);

}  // namespace tfm::ops::impl
