// CUDA reductions against the CPU: sum_rows (+=, into f32 or the activation
// dtype, through one chunk of rows and through many), sum_squares (=, f32)
// and scale. Both sums are deterministic: a second run gives the same bits.
#include <catch2/catch.hpp>

#include <cstring>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

TEST_CASE("cuda sum_rows matches the cpu and is deterministic", "[reduce]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 7800;
  struct Precision {
    DType x, out;
  };
  const Precision precisions[] = {{DType::f32, DType::f32},  {DType::bf16, DType::bf16},
                                  {DType::f16, DType::f16},  {DType::bf16, DType::f32},
                                  {DType::f16, DType::f32}};
  // (R..., N): one chunk, many chunks, more columns than one block row
  // covers, rank 3, and one large.
  const Shape shapes[] = {{1, 1},      {3, 7},         {5000, 515},      {33, 40000},
                          {4, 9, 131}, {25000, 512}};
  for (const Precision& pr : precisions)
    for (const Shape& shape : shapes) {
      const int64_t n = shape[-1], rows = shape.numel() / n;
      Tensor x = test::random(shape, pr.x, ++seed);
      Tensor out = test::random({n}, pr.out, ++seed);  // += onto this
      Tensor g_x = test::to_device(x, gpu), g_out = test::to_device(out, gpu);
      Tensor g_out2 = test::to_device(out, gpu);
      ops::sum_rows(g_x, g_out, cuda);
      ops::sum_rows(g_x, g_out2, cuda);
      Tensor x64 = test::cast(x, DType::f64), out64 = test::cast(out, DType::f64);
      ops::sum_rows(x64, out64, cpu);
      cuda.synchronize();
      INFO(dtype_name(pr.x) << " x, " << dtype_name(pr.out) << " out, shape " << shape.str());
      test::require_close({{"out", g_out, test::to_f64(out64), test::tolerance_for(pr.out, rows)}});
      CHECK(test::same_bits(g_out, g_out2));
    }
}

TEST_CASE("cuda sum_squares matches the cpu and is deterministic", "[reduce]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 7900;
  const Shape shapes[] = {{1}, {7}, {3, 5, 11}, {256}, {257}, {37, 1031}, {(1 << 24) + 3}};
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (const Shape& shape : shapes) {
      Tensor x = test::random(shape, dtype, ++seed);
      Tensor g_x = test::to_device(x, gpu);
      // out is written, not accumulated: start from garbage.
      Tensor g_out = test::to_device(test::random({1}, DType::f32, ++seed, 5.0f, 6.0f), gpu);
      Tensor g_out2(Shape{1}, DType::f32, gpu);
      ops::sum_squares(g_x, g_out, cuda);
      ops::sum_squares(g_x, g_out2, cuda);
      Tensor x64 = test::cast(x, DType::f64), out64({1}, DType::f64);
      ops::sum_squares(x64, out64, cpu);
      cuda.synchronize();
      INFO(dtype_name(dtype) << ", shape " << shape.str());
      // f32 sums in fixed-order trees: relative error a few f32 ulps.
      test::require_close({{"sum_squares", g_out, test::to_f64(out64), {1e-6, 1e-5}}});
      CHECK(test::same_bits(g_out, g_out2));
    }
}

TEST_CASE("cuda scale matches the cpu", "[reduce]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 8000;
  const Shape shapes[] = {{1}, {7}, {3, 5, 11}, {37, 1031}, {1 << 20}};
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (const Shape& shape : shapes)
      for (float alpha : {0.0f, -0.37f, 3.0f}) {
        Tensor x = test::random(shape, dtype, ++seed);
        Tensor g_x = test::to_device(x, gpu), x64 = test::cast(x, DType::f64);
        ops::scale(g_x, alpha, cuda);
        ops::scale(x64, alpha, cpu);
        cuda.synchronize();
        INFO(dtype_name(dtype) << ", shape " << shape.str() << ", alpha " << alpha);
        test::require_close({{"x", g_x, test::to_f64(x64), test::tolerance_for(dtype)}});
      }
}
