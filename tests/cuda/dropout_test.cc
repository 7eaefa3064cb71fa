// CUDA dropout against the CPU: with the same key both devices drop the same
// elements. In f32 the results are bit-identical to the CPU's f32 ops (one
// float multiply by the same float scale, one float add); in bf16 and f16 the
// mask (which elements are zero) is identical and the values are within the
// dtype's tolerance of the CPU's f64 results.
#include <catch2/catch.hpp>

#include <cstring>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

namespace {

const Shape kShapes[] = {{1}, {7}, {3, 5, 11}, {37, 1031}, {1 << 20}, {3, 333, 1027}};
const float kProbabilities[] = {0.0f, 0.1f, 0.5f, 0.9f};

// Index of the first element that is zero in one tensor and not in the
// other, or -1.
int64_t first_mask_difference(const TensorView& a, const TensorView& b) {
  const std::vector<double> va = test::to_f64(a), vb = test::to_f64(b);
  for (size_t i = 0; i < va.size(); ++i)
    if ((va[i] == 0.0) != (vb[i] == 0.0)) return static_cast<int64_t>(i);
  return -1;
}

}  // namespace

TEST_CASE("cuda dropout is bit-identical to the cpu in f32", "[dropout]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 7300;
  for (float p : kProbabilities)
    for (const Shape& shape : kShapes) {
      const RngKey key{0x5eed0000ull + seed, static_cast<uint32_t>(seed % 7), 42};
      // Inputs away from zero, so a zero output means a dropped element.
      Tensor x = test::random(shape, DType::f32, ++seed, 0.5f, 1.5f);
      Tensor r = test::random(shape, DType::f32, ++seed);
      Tensor y(shape, DType::f32), dx(shape, DType::f32), sum(shape, DType::f32);
      ops::dropout_forward(x, p, key, y, cpu);
      ops::dropout_backward(x, p, key, dx, cpu);
      ops::add_dropout_forward(r, x, p, key, sum, cpu);

      Tensor g_x = test::to_device(x, gpu), g_r = test::to_device(r, gpu);
      Tensor g_y(shape, DType::f32, gpu), g_dx(shape, DType::f32, gpu);
      Tensor g_sum(shape, DType::f32, gpu);
      ops::dropout_forward(g_x, p, key, g_y, cuda);
      ops::dropout_backward(g_x, p, key, g_dx, cuda);
      ops::add_dropout_forward(g_r, g_x, p, key, g_sum, cuda);
      cuda.synchronize();

      INFO("p " << p << ", shape " << shape.str());
      CHECK(test::same_bits(g_y, y));
      CHECK(test::same_bits(g_dx, dx));
      CHECK(test::same_bits(g_sum, sum));
      CHECK(first_mask_difference(g_y, y) == -1);
    }
}

TEST_CASE("cuda dropout in bf16 and f16 drops the cpu's elements", "[dropout]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 7400;
  for (DType dtype : {DType::bf16, DType::f16})
    for (float p : kProbabilities)
      for (const Shape& shape : kShapes) {
        const RngKey key{0xabcdef12345ull + seed, 3, static_cast<uint32_t>(seed)};
        Tensor x = test::random(shape, dtype, ++seed, 0.5f, 1.5f);
        Tensor r = test::random(shape, dtype, ++seed);
        Tensor x64 = test::cast(x, DType::f64), r64 = test::cast(r, DType::f64);
        Tensor y64(shape, DType::f64), dx64(shape, DType::f64), sum64(shape, DType::f64);
        ops::dropout_forward(x64, p, key, y64, cpu);
        ops::dropout_backward(x64, p, key, dx64, cpu);
        ops::add_dropout_forward(r64, x64, p, key, sum64, cpu);

        Tensor g_x = test::to_device(x, gpu), g_r = test::to_device(r, gpu);
        Tensor g_y(shape, dtype, gpu), g_dx(shape, dtype, gpu), g_sum(shape, dtype, gpu);
        ops::dropout_forward(g_x, p, key, g_y, cuda);
        ops::dropout_backward(g_x, p, key, g_dx, cuda);
        ops::add_dropout_forward(g_r, g_x, p, key, g_sum, cuda);
        cuda.synchronize();

        INFO(dtype_name(dtype) << ", p " << p << ", shape " << shape.str());
        CHECK(first_mask_difference(g_y, y64) == -1);
        CHECK(first_mask_difference(g_dx, dx64) == -1);
        const test::Tolerance tol = test::tolerance_for(dtype);
        test::require_close({{"dropout_forward", g_y, test::to_f64(y64), tol},
                             {"dropout_backward", g_dx, test::to_f64(dx64), tol},
                             {"add_dropout_forward", g_sum, test::to_f64(sum64), tol}});
      }
}

TEST_CASE("cuda dropout runs in place and copies exactly at p = 0", "[dropout]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu);
  uint64_t seed = 7500;
  const RngKey key{99, 1, 2};
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    const Shape shape{41, 257};
    Tensor x = test::random(shape, dtype, ++seed), r = test::random(shape, dtype, ++seed);
    Tensor g_x = test::to_device(x, gpu), g_r = test::to_device(r, gpu);
    Tensor g_y(shape, dtype, gpu);
    ops::dropout_forward(g_x, 0.0f, key, g_y, cuda);
    cuda.synchronize();
    INFO(dtype_name(dtype));
    CHECK(test::same_bits(g_y, x));  // p = 0: a copy

    ops::dropout_forward(g_x, 0.3f, key, g_y, cuda);
    ops::dropout_forward(g_x, 0.3f, key, g_x, cuda);           // y = x
    ops::add_dropout_forward(g_r, g_r, 0.3f, key, g_r, cuda);  // y = residual = s
    cuda.synchronize();
    CHECK(test::same_bits(g_x, test::to_device(g_y, Device::cpu())));
    // residual + dropout(residual), out of place, to compare with.
    Tensor g_r2 = test::to_device(r, gpu), g_want(shape, dtype, gpu);
    ops::add_dropout_forward(g_r2, g_r2, 0.3f, key, g_want, cuda);
    cuda.synchronize();
    CHECK(test::same_bits(g_r, test::to_device(g_want, Device::cpu())));
  }
}

TEST_CASE("cuda attention_dropout of padded tiles drops the cpu's unpadded elements", "[dropout]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  const RngKey key{4242, 3, 17};
  const int64_t G = 40, t = 13, s = 27;
  for (DType dtype : {DType::f32, DType::bf16})
    for (const auto& [tp, sp] : {std::pair<int64_t, int64_t>{t, s}, {16, 32}, {t, 32}}) {
      // The CPU drops the unpadded tile; the GPU a padded copy of it.
      Tensor x = test::random({G, t, s}, DType::f32, 9100 + tp + sp, 0.5f, 1.5f);
      Tensor y({G, t, s}, DType::f32);
      ops::attention_dropout(x, t, s, 0.3f, key, y, cpu);
      const std::vector<double> xv = test::to_f64(x), yv = test::to_f64(y);
      std::vector<double> padded(static_cast<size_t>(G * tp * sp), 7.0), want(padded.size(), 0.0);
      for (int64_t g = 0; g < G; ++g)
        for (int64_t i = 0; i < t; ++i)
          for (int64_t j = 0; j < s; ++j) {
            padded[(g * tp + i) * sp + j] = xv[(g * t + i) * s + j];
            want[(g * tp + i) * sp + j] = yv[(g * t + i) * s + j];
          }
      Tensor g_x = test::to_device(test::from_f64(padded, {G, tp, sp}, dtype), gpu);
      Tensor g_y({G, tp, sp}, dtype, gpu);
      ops::attention_dropout(g_x, t, s, 0.3f, key, g_y, cuda);
      cuda.synchronize();
      const Tensor want_t = test::from_f64(want, {G, tp, sp}, DType::f32);
      INFO(dtype_name(dtype) << " tile " << tp << " x " << sp);
      CHECK(first_mask_difference(test::to_device(g_y, Device::cpu()), want_t) == -1);
      test::require_close({{"y", test::to_device(g_y, Device::cpu()), want, test::tolerance_for(dtype)}});
      if (dtype == DType::f32) CHECK(test::same_bits(g_y, want_t));
    }
}
