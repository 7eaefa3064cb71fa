// CUDA elementwise ops against the CPU ops, and the Philox stream: the same
// key must give bit-identical numbers on both devices.
#include <catch2/catch.hpp>

#include <cstring>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

namespace {
const Shape kShapes[] = {{1}, {7}, {3, 5, 11}, {37, 1031}, {1 << 20}};
}  // namespace

TEST_CASE("cuda add and relu match the cpu", "[elementwise]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 1;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (const Shape& shape : kShapes) {
      Tensor a = test::random(shape, dtype, ++seed), b = test::random(shape, dtype, ++seed);
      Tensor a64 = test::cast(a, DType::f64), b64 = test::cast(b, DType::f64);
      Tensor ga = test::to_device(a, gpu), gb = test::to_device(b, gpu);
      Tensor gy(shape, dtype, gpu), gr(shape, dtype, gpu), gdx(shape, dtype, gpu);
      Tensor y64(shape, DType::f64), r64(shape, DType::f64), dx64(shape, DType::f64);
      ops::add(ga, gb, gy, cuda);
      ops::relu_forward(ga, gr, cuda);
      ops::relu_backward(gr, gb, gdx, cuda);
      ops::add(a64, b64, y64, cpu);
      ops::relu_forward(a64, r64, cpu);
      ops::relu_backward(r64, b64, dx64, cpu);
      cuda.synchronize();
      INFO(dtype_name(dtype) << " " << shape.str());
      const test::Tolerance tol = test::tolerance_for(dtype);
      test::require_close({{"add", gy, test::to_f64(y64), tol},
                           {"relu_forward", gr, test::to_f64(r64), tol},
                           {"relu_backward", gdx, test::to_f64(dx64), tol}});
    }
}

TEST_CASE("cuda uniform is bit-identical to the cpu for the same key", "[rng]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  for (int64_t n : {1, 3, 4, 5, 1001, 1 << 20}) {
    const RngKey key{0x123456789abcdefull, static_cast<uint32_t>(n), 77};
    Tensor host({n}, DType::f32), dev({n}, DType::f32, gpu);
    ops::uniform(host, key, -0.1f, 0.3f, cpu);
    ops::uniform(dev, key, -0.1f, 0.3f, cuda);
    cuda.synchronize();
    Tensor back = test::to_device(dev, Device::cpu());
    INFO("n = " << n);
    REQUIRE(std::memcmp(back.view().data(), host.view().data(), host.view().bytes()) == 0);
  }
}
