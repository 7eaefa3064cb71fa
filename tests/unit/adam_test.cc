// CPU Adam against a hand-written float64 loop over three steps (bias
// correction, gradient scale), in f32 and f64, and bad arguments.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

TEST_CASE("adam_step matches a float64 loop over three steps", "[adam]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 1400;
  for (DType dtype : {DType::f32, DType::f64})
    for (int64_t n : {int64_t{37}, int64_t{40001}}) {  // the second runs in parallel
      Tensor params = test::random({n}, dtype, ++seed);
      Tensor m = Tensor::zeros({n}, dtype), v = Tensor::zeros({n}, dtype);
      std::vector<double> p_ref = test::to_f64(params), m_ref(static_cast<size_t>(n), 0.0),
                          v_ref(static_cast<size_t>(n), 0.0);
      ops::AdamOptions o;
      o.lr = 1e-2f;
      o.grad_scale = 0.5f;
      // The options are floats; the reference uses exactly their values.
      const double b1 = o.beta1, b2 = o.beta2, eps = o.eps, lr = o.lr, gs = o.grad_scale;
      for (int64_t step = 1; step <= 3; ++step) {
        Tensor grads = test::random({n}, dtype, ++seed);
        const std::vector<double> gv = test::to_f64(grads);
        for (size_t i = 0; i < gv.size(); ++i) {
          const double g = gs * gv[i];
          m_ref[i] = b1 * m_ref[i] + (1 - b1) * g;
          v_ref[i] = b2 * v_ref[i] + (1 - b2) * g * g;
          const double mhat = m_ref[i] / (1 - std::pow(b1, step));
          const double vhat = v_ref[i] / (1 - std::pow(b2, step));
          p_ref[i] -= lr * mhat / (std::sqrt(vhat) + eps);
        }
        o.step = step;
        ops::adam_step(params, grads, m, v, o, cpu);
        INFO(dtype_name(dtype) << " P=" << n << " step " << step);
        const test::Tolerance tol = test::tolerance_for(dtype, step);
        test::require_close({{"params", params, p_ref, tol}, {"m", m, m_ref, tol}, {"v", v, v_ref, tol}});
      }
    }
}

TEST_CASE("adam_step rejects bad buffers and options", "[adam]") {
  Stream cpu(Device::cpu());
  Tensor p({5}, DType::f32), g({5}, DType::f32), m({5}, DType::f32), v({5}, DType::f32);
  Tensor g6({6}, DType::f32), i32({5}, DType::i32);
  ops::AdamOptions o;
  o.step = 0;
  REQUIRE_THROWS_WITH(ops::adam_step(p, g, m, v, o, cpu),
                      Catch::Contains("adam_step: step 0 must be 1 or more"));
  o.step = 1;
  REQUIRE_THROWS_WITH(ops::adam_step(p, g6, m, v, o, cpu),
                      Catch::Contains("adam_step: params is f32 (5) on cpu but grads is f32 (6) on cpu"));
  REQUIRE_THROWS_WITH(ops::adam_step(i32, g, m, v, o, cpu),
                      Catch::Contains("adam_step: params is i32 but must be f32"));
  o.beta2 = 1.0f;
  REQUIRE_THROWS_WITH(ops::adam_step(p, g, m, v, o, cpu), Catch::Contains("beta2 = 1"));
}
