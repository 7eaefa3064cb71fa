// Validation and dispatch of the layernorm ops (layernorm.h).
#include "kernels/layernorm.h"

#include "kernels/dispatch.h"

namespace tfm::ops {
namespace {

// A layer-norm call: x (R, D) with D > 0, gamma and beta (D), mean and rstd (R).
void require_layernorm(const char* op, const TensorView& x, const char* xname,
                       const TensorView& gamma, const TensorView* beta, const TensorView& mean,
                       const TensorView& rstd) {
  require_float(op, x, xname);
  TFM_REQUIRE(x.rank() >= 2 && x.dim(-1) > 0, "{}: {} is {} but must be (R, D) with D > 0", op,
              xname, x.str());
  const Shape d{x.dim(-1)}, r{rows_of(x)};
  require_shape(op, gamma, "gamma", d, "D");
  require_param(op, gamma, "gamma", x, xname);
  if (beta) {
    require_shape(op, *beta, "beta", d, "D");
    require_param(op, *beta, "beta", x, xname);
  }
  require_shape(op, mean, "mean", r, "R");
  require_shape(op, rstd, "rstd", r, "R");
  require_stat(op, mean, "mean", x, xname);
  require_stat(op, rstd, "rstd", x, xname);
}

}  // namespace


void layernorm_forward(const TensorView& x, const TensorView& gamma, const TensorView& beta,
                       float eps, const TensorView& y, const TensorView& mean,
                       const TensorView& rstd, const Stream& stream) {
  const char* op = "layernorm_forward";
  require_device(op, stream, {{"x", &x}, {"gamma", &gamma}, {"beta", &beta}, {"y", &y},
                              {"mean", &mean}, {"rstd", &rstd}});
  require_layernorm(op, x, "x", gamma, &beta, mean, rstd);
  require_same(op, x, "x", y, "y");
  TFM_REQUIRE(eps > 0.0f, "{}: eps = {} must be positive", op, eps);
  if (x.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> {
    impl::layernorm_forward<D>(x, gamma, beta, eps, y, mean, rstd, stream);
  });
}

void layernorm_backward(const TensorView& x, const TensorView& gamma, const TensorView& mean,
                        const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                        const TensorView& dgamma, const TensorView& dbeta, const Stream& stream) {
  const char* op = "layernorm_backward";
  require_device(op, stream, {{"x", &x}, {"gamma", &gamma}, {"mean", &mean}, {"rstd", &rstd},
                              {"dy", &dy}, {"dx", &dx}, {"dgamma", &dgamma}, {"dbeta", &dbeta}});
  require_layernorm(op, x, "x", gamma, nullptr, mean, rstd);
  require_same(op, x, "x", dy, "dy");
  require_same(op, x, "x", dx, "dx");
  require_shape(op, dgamma, "dgamma", gamma.shape(), "D");
  require_shape(op, dbeta, "dbeta", gamma.shape(), "D");
  require_param(op, dgamma, "dgamma", x, "x");
  require_param(op, dbeta, "dbeta", x, "x");
  if (x.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> {
    impl::layernorm_backward<D>(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, stream);
  });
}

void add_dropout_layernorm_forward(const TensorView& residual, const TensorView& s, float p,
                                   const RngKey& key, const TensorView& gamma,
                                   const TensorView& beta, float eps, const TensorView& h,
                                   const TensorView& y, const TensorView& mean,
                                   const TensorView& rstd, const Stream& stream) {
  const char* op = "add_dropout_layernorm_forward";
  require_device(op, stream, {{"residual", &residual}, {"s", &s}, {"gamma", &gamma},
                              {"beta", &beta}, {"h", &h}, {"y", &y}, {"mean", &mean},
                              {"rstd", &rstd}});
  require_layernorm(op, residual, "residual", gamma, &beta, mean, rstd);
  require_same(op, residual, "residual", s, "s");
  require_same(op, residual, "residual", h, "h");
  require_same(op, residual, "residual", y, "y");
  require_p(op, p);
  TFM_REQUIRE(eps > 0.0f, "{}: eps = {} must be positive", op, eps);
  if (y.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> {
    impl::add_dropout_layernorm_forward<D>(residual, s, p, key, gamma, beta, eps, h, y, mean, rstd,
                                           stream);
  });
}

void add_dropout_layernorm_backward(const TensorView& h, const TensorView& gamma,
                                    const TensorView& mean, const TensorView& rstd,
                                    const TensorView& dy, float p, const RngKey& key,
                                    const TensorView& dh, const TensorView& ds,
                                    const TensorView& dgamma, const TensorView& dbeta,
                                    const Stream& stream) {
  const char* op = "add_dropout_layernorm_backward";
  require_device(op, stream, {{"h", &h}, {"gamma", &gamma}, {"mean", &mean}, {"rstd", &rstd},
                              {"dy", &dy}, {"dh", &dh}, {"ds", &ds}, {"dgamma", &dgamma},
                              {"dbeta", &dbeta}});
  require_layernorm(op, h, "h", gamma, nullptr, mean, rstd);
  require_same(op, h, "h", dy, "dy");
  require_same(op, h, "h", dh, "dh");
  require_same(op, h, "h", ds, "ds");
  require_shape(op, dgamma, "dgamma", gamma.shape(), "D");
  require_shape(op, dbeta, "dbeta", gamma.shape(), "D");
  require_param(op, dgamma, "dgamma", h, "h");
  require_param(op, dbeta, "dbeta", h, "h");
  require_p(op, p);
  if (h.numel() == 0) return;
  on_device(stream, [&]<DeviceType D> {
    impl::add_dropout_layernorm_backward<D>(h, gamma, mean, rstd, dy, p, key, dh, ds, dgamma, dbeta,
                                            stream);
  });
}

}  // namespace tfm::ops
