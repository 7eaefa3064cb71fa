// CUDA layer norm against the CPU: plain and fused with residual + dropout,
// forward and backward, rows owned by a warp (D <= 1024) and by a block
// (larger D), every activation dtype and the mixed-precision combinations
// (bf16/f16 activations with f32 gamma/beta and f32 dgamma/dbeta). Backward
// inputs, including the saved mean and rstd, are the same numbers on both
// devices (the GPU's statistics handed to the CPU in f64). dx may be dy.
#include <catch2/catch.hpp>

#include <cstring>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

namespace {

struct Precision {
  DType act, param, grad;  // x and y; gamma and beta; dgamma and dbeta
};
const Precision kPrecisions[] = {
    {DType::f32, DType::f32, DType::f32},  {DType::bf16, DType::bf16, DType::bf16},
    {DType::f16, DType::f16, DType::f16},  {DType::bf16, DType::f32, DType::f32},
    {DType::f16, DType::f32, DType::f32},  {DType::bf16, DType::bf16, DType::f32}};

struct Size {
  int64_t r, d;
};
// Warp rows (D <= 1024, the last one large), block rows (D > 1024).
const Size kSizes[] = {{1, 1}, {7, 5}, {33, 515}, {4096, 1024}, {9, 1031}, {300, 3001}};

constexpr float kEps = 1e-5f;

Tensor gpu_copy(const TensorView& t) { return test::to_device(t, Device::cuda(0)); }
Tensor f64_copy(const TensorView& t) { return test::cast(t, DType::f64); }

}  // namespace

TEST_CASE("cuda layernorm forward and backward match the cpu", "[layernorm]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 7600;
  for (const Precision& pr : kPrecisions)
    for (const Size& s : kSizes) {
      const Shape rd{s.r, s.d}, d{s.d}, r{s.r};
      Tensor x = test::random(rd, pr.act, ++seed, -2.0f, 3.0f);
      Tensor gamma = test::random(d, pr.param, ++seed, 0.5f, 1.5f);
      Tensor beta = test::random(d, pr.param, ++seed);
      Tensor dy = test::random(rd, pr.act, ++seed);
      Tensor dgamma = test::random(d, pr.grad, ++seed), dbeta = test::random(d, pr.grad, ++seed);

      // Forward.
      Tensor g_x = gpu_copy(x), g_gamma = gpu_copy(gamma), g_beta = gpu_copy(beta);
      Tensor g_y(rd, pr.act, gpu), g_mean(r, DType::f32, gpu), g_rstd(r, DType::f32, gpu);
      ops::layernorm_forward(g_x, g_gamma, g_beta, kEps, g_y, g_mean, g_rstd, cuda);
      Tensor x64 = f64_copy(x), gamma64 = f64_copy(gamma), beta64 = f64_copy(beta);
      Tensor y64(rd, DType::f64), mean64(r, DType::f64), rstd64(r, DType::f64);
      ops::layernorm_forward(x64, gamma64, beta64, kEps, y64, mean64, rstd64, cpu);
      cuda.synchronize();

      INFO(dtype_name(pr.act) << " x, " << dtype_name(pr.param) << " gamma/beta, "
                              << dtype_name(pr.grad) << " dgamma/dbeta, (R, D) = (" << s.r << ", "
                              << s.d << ")");
      // Statistics: the same inputs summed in f32.
      const test::Tolerance stat = test::tolerance_for(DType::f32, s.d);
      test::require_close({{"y", g_y, test::to_f64(y64), test::tolerance_for(pr.act, s.d)},
                           {"mean", g_mean, test::to_f64(mean64), stat},
                           {"rstd", g_rstd, test::to_f64(rstd64), stat}});

      // Backward, on the GPU's statistics.
      Tensor g_dy = gpu_copy(dy), g_dx(rd, pr.act, gpu);
      Tensor g_dgamma = gpu_copy(dgamma), g_dbeta = gpu_copy(dbeta);
      ops::layernorm_backward(g_x, g_gamma, g_mean, g_rstd, g_dy, g_dx, g_dgamma, g_dbeta, cuda);
      // In place (dx = dy) must give the same bits.
      Tensor g_dy2 = gpu_copy(dy), g_dgamma2 = gpu_copy(dgamma), g_dbeta2 = gpu_copy(dbeta);
      ops::layernorm_backward(g_x, g_gamma, g_mean, g_rstd, g_dy2, g_dy2, g_dgamma2, g_dbeta2,
                              cuda);
      cuda.synchronize();
      Tensor smean64 = f64_copy(g_mean), srstd64 = f64_copy(g_rstd);
      Tensor dy64 = f64_copy(dy), dx64(rd, DType::f64);
      Tensor dgamma64 = f64_copy(dgamma), dbeta64 = f64_copy(dbeta);
      ops::layernorm_backward(x64, gamma64, smean64, srstd64, dy64, dx64, dgamma64, dbeta64, cpu);

      test::require_close(
          {{"dx", g_dx, test::to_f64(dx64), test::tolerance_for(pr.act, s.d)},
           {"dgamma", g_dgamma, test::to_f64(dgamma64), test::tolerance_for(pr.grad, s.r)},
           {"dbeta", g_dbeta, test::to_f64(dbeta64), test::tolerance_for(pr.grad, s.r)}});
      CHECK(test::same_bits(g_dy2, g_dx));
      CHECK(test::same_bits(g_dgamma2, g_dgamma));  // deterministic column sums
      CHECK(test::same_bits(g_dbeta2, g_dbeta));
    }
}

TEST_CASE("cuda add_dropout_layernorm forward and backward match the cpu", "[layernorm]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 7700;
  for (const Precision& pr : kPrecisions)
    for (const Size& s : kSizes)
      for (float p : {0.0f, 0.1f}) {
        const Shape rd{s.r, s.d}, d{s.d}, r{s.r};
        const RngKey key{0x1234ull + seed, 5, 11};
        Tensor residual = test::random(rd, pr.act, ++seed, -2.0f, 2.0f);
        Tensor sub = test::random(rd, pr.act, ++seed);
        Tensor gamma = test::random(d, pr.param, ++seed, 0.5f, 1.5f);
        Tensor beta = test::random(d, pr.param, ++seed);
        Tensor dy = test::random(rd, pr.act, ++seed);
        Tensor dgamma = test::random(d, pr.grad, ++seed), dbeta = test::random(d, pr.grad, ++seed);

        // Forward.
        Tensor g_res = gpu_copy(residual), g_sub = gpu_copy(sub);
        Tensor g_gamma = gpu_copy(gamma), g_beta = gpu_copy(beta);
        Tensor g_h(rd, pr.act, gpu), g_y(rd, pr.act, gpu);
        Tensor g_mean(r, DType::f32, gpu), g_rstd(r, DType::f32, gpu);
        ops::add_dropout_layernorm_forward(g_res, g_sub, p, key, g_gamma, g_beta, kEps, g_h, g_y,
                                           g_mean, g_rstd, cuda);
        Tensor res64 = f64_copy(residual), sub64 = f64_copy(sub);
        Tensor gamma64 = f64_copy(gamma), beta64 = f64_copy(beta);
        Tensor h64(rd, DType::f64), y64(rd, DType::f64);
        Tensor mean64(r, DType::f64), rstd64(r, DType::f64);
        ops::add_dropout_layernorm_forward(res64, sub64, p, key, gamma64, beta64, kEps, h64, y64,
                                           mean64, rstd64, cpu);
        cuda.synchronize();

        INFO(dtype_name(pr.act) << " x, " << dtype_name(pr.param) << " gamma/beta, "
                                << dtype_name(pr.grad) << " dgamma/dbeta, (R, D) = (" << s.r
                                << ", " << s.d << "), p " << p);
        // h against the CPU's; y and the statistics against the CPU's layer
        // norm of h as the GPU stored it (rounded to the activation dtype),
        // which is what the GPU normalizes and what backward reads.
        Tensor sh64 = f64_copy(g_h);
        Tensor ny64(rd, DType::f64), nmean64(r, DType::f64), nrstd64(r, DType::f64);
        ops::layernorm_forward(sh64, gamma64, beta64, kEps, ny64, nmean64, nrstd64, cpu);
        const test::Tolerance row = test::tolerance_for(pr.act, s.d);
        const test::Tolerance stat = test::tolerance_for(DType::f32, s.d);
        test::require_close({{"h", g_h, test::to_f64(h64), test::tolerance_for(pr.act)},
                             {"y", g_y, test::to_f64(ny64), row},
                             {"mean", g_mean, test::to_f64(nmean64), stat},
                             {"rstd", g_rstd, test::to_f64(nrstd64), stat}});
        if (pr.act == DType::f32)  // h rounds alike: the fused reference applies directly
          test::require_close({{"y (fused reference)", g_y, test::to_f64(y64), row},
                               {"mean (fused reference)", g_mean, test::to_f64(mean64), stat},
                               {"rstd (fused reference)", g_rstd, test::to_f64(rstd64), stat}});

        // Backward, on the GPU's h and statistics; dh = dy in the second run.
        Tensor g_dy = gpu_copy(dy), g_dh(rd, pr.act, gpu), g_ds(rd, pr.act, gpu);
        Tensor g_dgamma = gpu_copy(dgamma), g_dbeta = gpu_copy(dbeta);
        ops::add_dropout_layernorm_backward(g_h, g_gamma, g_mean, g_rstd, g_dy, p, key, g_dh, g_ds,
                                            g_dgamma, g_dbeta, cuda);
        Tensor g_dy2 = gpu_copy(dy), g_ds2(rd, pr.act, gpu);
        Tensor g_dgamma2 = gpu_copy(dgamma), g_dbeta2 = gpu_copy(dbeta);
        ops::add_dropout_layernorm_backward(g_h, g_gamma, g_mean, g_rstd, g_dy2, p, key, g_dy2,
                                            g_ds2, g_dgamma2, g_dbeta2, cuda);
        cuda.synchronize();
        Tensor smean64 = f64_copy(g_mean), srstd64 = f64_copy(g_rstd);
        Tensor dy64 = f64_copy(dy), dh64(rd, DType::f64), ds64(rd, DType::f64);
        Tensor dgamma64 = f64_copy(dgamma), dbeta64 = f64_copy(dbeta);
        ops::add_dropout_layernorm_backward(sh64, gamma64, smean64, srstd64, dy64, p, key, dh64,
                                            ds64, dgamma64, dbeta64, cpu);

        test::require_close(
            {{"dh", g_dh, test::to_f64(dh64), row},
             {"ds", g_ds, test::to_f64(ds64), row},
             {"dgamma", g_dgamma, test::to_f64(dgamma64), test::tolerance_for(pr.grad, s.r)},
             {"dbeta", g_dbeta, test::to_f64(dbeta64), test::tolerance_for(pr.grad, s.r)}});
        CHECK(test::same_bits(g_dy2, g_dh));
        CHECK(test::same_bits(g_ds2, g_ds));
        CHECK(test::same_bits(g_dgamma2, g_dgamma));
        CHECK(test::same_bits(g_dbeta2, g_dbeta));
      }
}
