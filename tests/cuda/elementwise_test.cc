// CUDA elementwise ops against the CPU ops, and the Philox stream: the same
// key must give bit-identical numbers on both devices.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <iterator>

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

TEST_CASE("cuda activations match the cpu", "[elementwise]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 300;
  for (ops::Activation act : {ops::Activation::relu, ops::Activation::gelu, ops::Activation::silu})
    for (DType dtype : {DType::f32, DType::bf16, DType::f16})
      for (const Shape& shape : kShapes) {
        Tensor x = test::random(shape, dtype, ++seed, -6.0f, 6.0f), dy = test::random(shape, dtype, ++seed);
        Tensor x64 = test::cast(x, DType::f64), dy64 = test::cast(dy, DType::f64);
        Tensor gx = test::to_device(x, gpu), gdy = test::to_device(dy, gpu);
        Tensor gy(shape, dtype, gpu), gdx(shape, dtype, gpu);
        Tensor y64(shape, DType::f64), dx64(shape, DType::f64);
        ops::activation_forward(gx, act, gy, cuda);
        ops::activation_backward(gx, gdy, act, gdx, cuda);
        ops::activation_forward(x64, act, y64, cpu);
        ops::activation_backward(x64, dy64, act, dx64, cpu);
        cuda.synchronize();
        INFO("activation " << static_cast<int>(act) << " " << dtype_name(dtype) << " " << shape.str());
        const test::Tolerance tol = test::tolerance_for(dtype);
        test::require_close({{"activation_forward", gy, test::to_f64(y64), tol},
                             {"activation_backward", gdx, test::to_f64(dx64), tol}});
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

TEST_CASE("cuda cast is bit-identical to the cpu between every pair of float dtypes", "[elementwise]") {
  // Round to nearest even on both devices: the bridge from f32 master
  // weights to 16-bit compute must give the GEMMs the CPU's numbers. The
  // inputs include values that round (f32 tails), ties, overflow to
  // infinity in f16, subnormals, infinities and NaN.
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 500;
  const DType dtypes[] = {DType::f32, DType::bf16, DType::f16};
  for (const Shape& shape : kShapes)
    for (DType from : dtypes)
      for (DType to : dtypes) {
        Tensor x = test::random(shape, DType::f32, ++seed, -70000.0f, 70000.0f);
        const float special[] = {0.0f, -0.0f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 512, 65520.0f,
                                 1e-6f, -1e-40f, INFINITY, -INFINITY, NAN};
        for (size_t i = 0; i < std::size(special) && static_cast<int64_t>(i) < x.numel(); ++i)
          x.data_as<float>()[i] = special[i];
        Tensor src(shape, from);
        ops::cast(x, src, cpu);
        Tensor want(shape, to), got_host(shape, to);
        ops::cast(src, want, cpu);
        const Tensor g_src = test::to_device(src, gpu);
        Tensor g_dst(shape, to, gpu);
        ops::cast(g_src, g_dst, cuda);
        copy(got_host, g_dst, cuda);
        INFO(dtype_name(from) << " -> " << dtype_name(to) << " " << shape.str());
        // NaN payloads may differ; every other bit pattern must not.
        const std::vector<double> a = test::to_f64(got_host), b = test::to_f64(want);
        for (size_t i = 0; i < a.size(); ++i)
          if (!(std::isnan(a[i]) && std::isnan(b[i]))) REQUIRE(a[i] == b[i]);
      }
}

TEST_CASE("cuda copy_columns gives the cpu's bits at every alignment", "[elementwise]") {
  // Widths and offsets that allow 16-, 4-, 2- and 1-byte units of copy.
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 700;
  struct Case { int64_t rows, cols, col, width; };
  for (DType dtype : {DType::f32, DType::bf16})
    for (const Case& c : {Case{3, 24, 8, 8}, Case{5, 24, 3, 7}, Case{7, 33, 1, 20}, Case{300, 1536, 512, 512},
                          Case{1, 9, 8, 1}}) {
      const Tensor x = test::random({c.rows, c.cols}, dtype, ++seed, -5.0f, 5.0f);
      Tensor want({c.rows, c.width}, dtype), got({c.rows, c.width}, dtype);
      ops::copy_columns(x, c.col, want, cpu);
      const Tensor g_x = test::to_device(x, gpu);
      Tensor g_y({c.rows, c.width}, dtype, gpu);
      ops::copy_columns(g_x, c.col, g_y, cuda);
      copy(got, g_y, cuda);
      INFO(dtype_name(dtype) << " rows " << c.rows << " columns [" << c.col << ", " << c.col + c.width << ") of "
                             << c.cols);
      REQUIRE(std::memcmp(got.view().data(), want.view().data(), want.view().bytes()) == 0);
    }
}
