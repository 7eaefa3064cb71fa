// CUDA output-layer ops against the CPU: log_softmax, and the label-smoothed
// cross-entropy (gradient written over the logits, loss and nll sums
// accumulated in f32), with padding rows, with and without smoothing, from
// one logit per row to a realistic vocabulary.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

namespace {

// (N, V): a single logit, odd, wide, and one large.
const std::array<int64_t, 2> kSizes[] = {{1, 1}, {3, 7}, {37, 1031}, {5, 40000}, {256, 32003}};

}  // namespace

TEST_CASE("cuda log_softmax matches the cpu", "[loss]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 8300;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (auto [n, v] : kSizes) {
      Tensor x = test::random({n, v}, dtype, ++seed, -8.0f, 8.0f);
      Tensor g_x = test::to_device(x, gpu), g_y({n, v}, dtype, gpu);
      ops::log_softmax(g_x, g_y, cuda);
      ops::log_softmax(g_x, g_x, cuda);  // in place
      Tensor x64 = test::cast(x, DType::f64), y64({n, v}, DType::f64);
      ops::log_softmax(x64, y64, cpu);
      cuda.synchronize();
      INFO(dtype_name(dtype) << ", (N, V) = (" << n << ", " << v << ")");
      test::require_close({{"y", g_y, test::to_f64(y64), test::tolerance_for(dtype, v)}});
      CHECK(test::same_bits(g_x, g_y));
    }
}

TEST_CASE("cuda smoothed_cross_entropy matches the cpu", "[loss]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 8400;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (auto [n, v] : kSizes)
      for (float eps : {0.0f, 0.1f}) {
        const float grad_scale = 0.25f;
        // Targets in [0, V), every third row padding (-1).
        std::vector<double> tv = test::to_f64(test::random({n}, DType::f64, ++seed, 0.0f, 1.0f));
        for (size_t i = 0; i < tv.size(); ++i)
          tv[i] = i % 3 == 2 ? -1.0 : std::min<double>(v - 1, std::floor(tv[i] * double(v)));
        Tensor targets = test::from_f64(tv, {n}, DType::i32);
        Tensor logits = test::random({n, v}, dtype, ++seed, -6.0f, 6.0f);
        Tensor sums = test::random({2}, DType::f32, ++seed, 1.0f, 2.0f);  // += onto this

        Tensor g_targets = test::to_device(targets, gpu), g_logits = test::to_device(logits, gpu);
        Tensor g_sums = test::to_device(sums, gpu);
        ops::smoothed_cross_entropy(g_logits, g_targets, eps, grad_scale, g_sums, cuda);
        Tensor logits64 = test::cast(logits, DType::f64), sums64 = test::cast(sums, DType::f64);
        ops::smoothed_cross_entropy(logits64, targets, eps, grad_scale, sums64, cpu);
        cuda.synchronize();

        INFO(dtype_name(dtype) << ", (N, V) = (" << n << ", " << v << "), eps " << eps);
        // Each row's loss (about log V) has f32 error from V-long sums; n of
        // them add up.
        const test::Tolerance sum_tol{2e-5 * static_cast<double>(n) * std::log(double(v) + 2.0),
                                      1e-5};
        test::require_close(
            {{"dlogits", g_logits, test::to_f64(logits64), test::tolerance_for(dtype)},
             {"sums", g_sums, test::to_f64(sums64), sum_tol}});
        // Padding rows are exactly zero.
        const std::vector<double> grad = test::to_f64(g_logits);
        int64_t nonzero_padding = 0;
        for (int64_t r = 0; r < n; ++r)
          if (tv[static_cast<size_t>(r)] < 0)
            for (int64_t j = 0; j < v; ++j)
              if (grad[static_cast<size_t>(r * v + j)] != 0.0) ++nonzero_padding;
        CHECK(nonzero_padding == 0);
      }
}

TEST_CASE("cuda smoothed_cross_entropy writes a 16-bit gradient beside f32 logits", "[loss]") {
  // The training step's output layer: f32 logits, the gradient written
  // once, in the GEMMs' compute dtype, and the logits left as they were.
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 8700;
  for (DType gdtype : {DType::bf16, DType::f16, DType::f32})
    for (auto [n, v] : kSizes) {
      std::vector<double> tv = test::to_f64(test::random({n}, DType::f64, ++seed, 0.0f, 1.0f));
      for (size_t i = 0; i < tv.size(); ++i)
        tv[i] = i % 4 == 3 ? -1.0 : std::min<double>(v - 1, std::floor(tv[i] * double(v)));
      Tensor targets = test::from_f64(tv, {n}, DType::i32);
      Tensor logits = test::random({n, v}, DType::f32, ++seed, -6.0f, 6.0f);
      Tensor g_targets = test::to_device(targets, gpu), g_logits = test::to_device(logits, gpu);
      Tensor g_grad({n, v}, gdtype, gpu), g_sums = test::to_device(Tensor::zeros({2}, DType::f32), gpu);
      ops::smoothed_cross_entropy(g_logits, g_targets, 0.1f, 0.5f, g_sums, cuda, g_grad);
      Tensor logits64 = test::cast(logits, DType::f64), sums64 = Tensor::zeros({2}, DType::f64);
      ops::smoothed_cross_entropy(logits64, targets, 0.1f, 0.5f, sums64, cpu);
      cuda.synchronize();
      INFO(dtype_name(gdtype) << ", (N, V) = (" << n << ", " << v << ")");
      const test::Tolerance sum_tol{2e-5 * static_cast<double>(n) * std::log(double(v) + 2.0), 1e-5};
      test::require_close({{"dlogits", g_grad, test::to_f64(logits64), test::tolerance_for(gdtype)},
                           {"sums", g_sums, test::to_f64(sums64), sum_tol}});
      CHECK(test::to_f64(g_logits) == test::to_f64(logits));
    }
}
