// CUDA attention helpers against the CPU: the (0, 2, 1, 3) permutation
// (exact), and the masked softmax forward and backward with per-sentence key
// lengths (including 0 and full) and causality, rows owned by a warp (Tk <=
// 1024) and by a block (larger Tk). Hidden keys must be exactly 0 and rows
// that see no key all 0; in-place calls give the same bits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

namespace {

// Key lengths in [0, tk], with 0 and tk themselves among them when b > 2.
std::vector<double> random_lengths(int64_t b, int64_t tk, uint64_t seed) {
  std::vector<double> u = test::to_f64(test::random({b}, DType::f64, seed, 0.0f, 1.0f));
  for (double& v : u) v = std::min<double>(tk, std::floor(v * static_cast<double>(tk + 1)));
  if (b > 2) {
    u[0] = 0;
    u[1] = static_cast<double>(tk);
  }
  return u;
}

}  // namespace

TEST_CASE("cuda permute_0213 matches the cpu exactly", "[attention]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 8100;
  const Shape shapes[] = {{1, 1, 1, 1}, {2, 3, 5, 7}, {3, 17, 4, 64}, {16, 100, 8, 64}};
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (const Shape& shape : shapes) {
      const Shape out_shape{shape[0], shape[2], shape[1], shape[3]};
      Tensor x = test::random(shape, dtype, ++seed);
      Tensor g_x = test::to_device(x, gpu), g_y(out_shape, dtype, gpu), g_back(shape, dtype, gpu);
      ops::permute_0213(g_x, g_y, cuda);
      ops::permute_0213(g_y, g_back, cuda);  // the permutation is its own inverse
      Tensor x64 = test::cast(x, DType::f64), y64(out_shape, DType::f64);
      ops::permute_0213(x64, y64, cpu);
      cuda.synchronize();
      INFO(dtype_name(dtype) << ", shape " << shape.str());
      test::require_close({{"y", g_y, test::to_f64(y64), {0, 0}}});
      CHECK(test::same_bits(g_back, x));
    }
}

TEST_CASE("cuda pack_heads and unpack_heads match the cpu exactly", "[attention]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 8150;
  // (B, H, L, X) with random lengths in [0, L]; the heads at column `col`
  // of rows `tail` columns wider, as a fused q, k, v projection has them.
  const Shape shapes[] = {{1, 1, 1, 1}, {3, 2, 5, 7}, {16, 8, 40, 64}, {5, 1, 9, 512}};
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (const Shape& shape : shapes)
      for (const auto& [col, tail] : {std::pair<int64_t, int64_t>{0, 0}, {5, 3}, {shape[1] * shape[3], 0}}) {
      const std::vector<double> lengths = random_lengths(shape[0], shape[2], ++seed);
      std::vector<int> off(1, 0);
      for (double len : lengths) off.push_back(off.back() + static_cast<int>(len));
      const int64_t n = off.back();
      Tensor offsets = test::i32(off), g_offsets = test::to_device(offsets, gpu);
      const int64_t w = col + shape[1] * shape[3] + tail;
      Tensor rows = test::random({n, w}, dtype, ++seed);
      Tensor heads = test::random(shape, dtype, ++seed);
      Tensor g_rows = test::to_device(rows, gpu), g_heads = test::to_device(heads, gpu);
      Tensor other = test::random({n, w}, dtype, ++seed);  // columns outside the heads stay
      Tensor g_back = test::to_device(other, gpu);
      ops::unpack_heads(g_rows, g_offsets, g_heads, cuda, col);
      ops::pack_heads(g_heads, g_offsets, g_back, cuda, col);
      Tensor rows64 = test::cast(rows, DType::f64), heads64(shape, DType::f64);
      Tensor back64 = test::cast(other, DType::f64);
      ops::unpack_heads(rows64, offsets, heads64, cpu, col);
      ops::pack_heads(heads64, offsets, back64, cpu, col);
      cuda.synchronize();
      INFO(dtype_name(dtype) << ", shape " << shape.str() << ", col " << col << ", width " << w);
      test::require_close({{"heads", g_heads, test::to_f64(heads64), {0, 0}},
                           {"round trip", g_back, test::to_f64(back64), {0, 0}}});
    }
}

TEST_CASE("cuda masked softmax forward and backward match the cpu", "[attention]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 8200;
  // (B, H, Tq, Tk): warp rows, self-attention squares for causality, block
  // rows (Tk > 1024), and one large; short packed rows by a thread each
  // (Tk <= 64, a multiple of 8: the padded tiles), square and not.
  const Shape shapes[] = {{1, 1, 1, 1},     {3, 2, 5, 7},   {4, 3, 9, 9},  {3, 2, 3, 1500},
                          {4, 1, 1030, 1030}, {32, 8, 64, 64}, {6, 3, 32, 32}, {5, 2, 7, 16},
                          {2, 2, 40, 40},   {3, 1, 9, 48}};
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (const Shape& shape : shapes)
      for (bool causal : {false, true}) {
        const int64_t b = shape[0], h = shape[1], tq = shape[2], tk = shape[3];
        const std::vector<double> lengths = random_lengths(b, tk, ++seed);
        Tensor k_lengths = test::from_f64(lengths, {b}, DType::i32);
        Tensor scores = test::random(shape, dtype, ++seed, -4.0f, 4.0f);
        Tensor dprobs = test::random(shape, dtype, ++seed);

        Tensor g_len = test::to_device(k_lengths, gpu), g_scores = test::to_device(scores, gpu);
        Tensor g_probs(shape, dtype, gpu);
        ops::masked_softmax_forward(g_scores, g_len, causal, g_probs, cuda);
        Tensor scores64 = test::cast(scores, DType::f64), probs64(shape, DType::f64);
        ops::masked_softmax_forward(scores64, k_lengths, causal, probs64, cpu);
        cuda.synchronize();

        INFO(dtype_name(dtype) << ", shape " << shape.str() << (causal ? ", causal" : ""));
        const test::Tolerance tol = test::tolerance_for(dtype, tk);
        test::require_close({{"probs", g_probs, test::to_f64(probs64), tol}});
        // Hidden keys are exactly 0 (which covers rows that see no key).
        const std::vector<double> got = test::to_f64(g_probs);
        int64_t nonzero_hidden = 0;
        for (int64_t bi = 0; bi < b; ++bi)
          for (int64_t hi = 0; hi < h; ++hi)
            for (int64_t i = 0; i < tq; ++i) {
              int64_t visible = static_cast<int64_t>(lengths[static_cast<size_t>(bi)]);
              if (causal) visible = std::min(visible, i + 1);
              for (int64_t j = visible; j < tk; ++j)
                if (got[static_cast<size_t>(((bi * h + hi) * tq + i) * tk + j)] != 0.0)
                  ++nonzero_hidden;
            }
        CHECK(nonzero_hidden == 0);

        // Backward on the GPU's probabilities; then in place.
        Tensor g_dprobs = test::to_device(dprobs, gpu), g_dscores(shape, dtype, gpu);
        ops::masked_softmax_backward(g_probs, g_dprobs, g_dscores, cuda);
        ops::masked_softmax_backward(g_probs, g_dprobs, g_dprobs, cuda);
        // Forward in place.
        Tensor g_inplace = test::to_device(scores, gpu);
        ops::masked_softmax_forward(g_inplace, g_len, causal, g_inplace, cuda);
        cuda.synchronize();
        Tensor sprobs64 = test::cast(g_probs, DType::f64);
        Tensor dprobs64 = test::cast(dprobs, DType::f64);
        Tensor dscores64(shape, DType::f64);
        ops::masked_softmax_backward(sprobs64, dprobs64, dscores64, cpu);
        test::require_close({{"dscores", g_dscores, test::to_f64(dscores64), tol}});
        CHECK(test::same_bits(g_dprobs, g_dscores));
        CHECK(test::same_bits(g_inplace, g_probs));
      }
}
