// CUDA Adam against the CPU over a few steps of one flat f32 buffer: the
// first step (strongest bias correction), a late step, gradient scaling,
// decoupled weight decay with other betas, and one buffer of several million
// parameters.
#include <catch2/catch.hpp>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

TEST_CASE("cuda adam_step matches the cpu", "[adam]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 8500;
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1031}, int64_t{(1 << 22) + 5}})
    for (int64_t first_step : {int64_t{1}, int64_t{1000}})
    for (float weight_decay : {0.0f, 0.1f}) {
      Tensor params = test::random({n}, DType::f32, ++seed);
      Tensor m = test::random({n}, DType::f32, ++seed, -0.1f, 0.1f);
      Tensor v = test::random({n}, DType::f32, ++seed, 0.0f, 0.01f);
      Tensor g_params = test::to_device(params, gpu), g_m = test::to_device(m, gpu);
      Tensor g_v = test::to_device(v, gpu);
      Tensor params64 = test::cast(params, DType::f64), m64 = test::cast(m, DType::f64);
      Tensor v64 = test::cast(v, DType::f64);
      for (int64_t step = first_step; step < first_step + 3; ++step) {
        ops::AdamOptions o;
        o.lr = 1e-3f;
        o.step = step;
        o.grad_scale = step % 2 ? 0.5f : 1.0f;
        o.weight_decay = weight_decay;  // AdamW's decay (tfm-train --weight-decay)
        o.beta2 = weight_decay > 0 ? 0.999f : 0.98f;
        Tensor grads = test::random({n}, DType::f32, ++seed);
        Tensor g_grads = test::to_device(grads, gpu), grads64 = test::cast(grads, DType::f64);
        ops::adam_step(g_params, g_grads, g_m, g_v, o, cuda);
        ops::adam_step(params64, grads64, m64, v64, o, cpu);
        cuda.synchronize();  // before g_grads is freed
      }
      INFO("n " << n << ", steps " << first_step << " to " << first_step + 2 << ", weight decay " << weight_decay);
      const test::Tolerance tol = test::tolerance_for(DType::f32);
      test::require_close({{"params", g_params, test::to_f64(params64), tol},
                           {"m", g_m, test::to_f64(m64), tol},
                           {"v", g_v, test::to_f64(v64), tol}});
    }
}
