// CPU attention pieces: the head permutation, and the masked softmax (key
// lengths, causal) against float64 in f32 and f64, its backward against
// finite differences in double, and bad arguments.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

namespace {

// Softmax over keys j < len[b] (and j <= i when causal); 0 elsewhere.
std::vector<double> softmax_reference(const std::vector<double>& s, const std::vector<int>& len,
                                      bool causal, int64_t nb, int64_t nh, int64_t tq, int64_t tk) {
  std::vector<double> p(s.size(), 0.0);
  for (int64_t r = 0; r < nb * nh * tq; ++r) {
    const int64_t b = r / (nh * tq), i = r % tq;
    auto seen = [&](int64_t j) { return j < len[static_cast<size_t>(b)] && (!causal || j <= i); };
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < tk; ++j)
      if (seen(j)) mx = std::max(mx, s[static_cast<size_t>(r * tk + j)]);
    for (int64_t j = 0; j < tk; ++j)
      if (seen(j)) sum += std::exp(s[static_cast<size_t>(r * tk + j)] - mx);
    for (int64_t j = 0; j < tk; ++j)
      if (seen(j)) p[static_cast<size_t>(r * tk + j)] = std::exp(s[static_cast<size_t>(r * tk + j)] - mx) / sum;
  }
  return p;
}

}  // namespace

TEST_CASE("permute_0213 moves rows and round-trips exactly", "[attention]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 1000;
  const Shape shapes[] = {{3, 5, 2, 7}, {1, 1, 1, 1}, {8, 33, 4, 65}};
  for (DType dtype : {DType::f32, DType::f64})
    for (const Shape& shape : shapes) {
      Tensor x = test::random(shape, dtype, ++seed);
      Tensor y({shape[0], shape[2], shape[1], shape[3]}, dtype), back(shape, dtype);
      const std::vector<double> xv = test::to_f64(x);
      std::vector<double> ref(xv.size());
      for (int64_t a = 0; a < shape[0]; ++a)
        for (int64_t b = 0; b < shape[1]; ++b)
          for (int64_t c = 0; c < shape[2]; ++c)
            for (int64_t d = 0; d < shape[3]; ++d)
              ref[static_cast<size_t>(((a * shape[2] + c) * shape[1] + b) * shape[3] + d)] =
                  xv[static_cast<size_t>(((a * shape[1] + b) * shape[2] + c) * shape[3] + d)];
      ops::permute_0213(x, y, cpu);
      ops::permute_0213(y, back, cpu);
      INFO(dtype_name(dtype) << " " << shape.str());
      test::require_close({{"y", y, ref, {0, 0}}, {"round trip", back, xv, {0, 0}}});
    }
}

TEST_CASE("pack_heads and unpack_heads move packed rows to padded heads and back", "[attention]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 1050;
  // (lengths, L, H, X, col, tail): an empty sentence, a full one, one head,
  // odd sizes; heads at column col of rows with `tail` more columns after.
  struct Case { std::vector<int> len; int64_t l, h, x, col, tail; };
  const Case cases[] = {{{3, 0, 5, 1}, 5, 2, 3, 0, 0}, {{1}, 1, 1, 1, 0, 0},
                        {{7, 2, 7}, 9, 4, 5, 0, 0},    {{3, 0, 5, 1}, 5, 2, 3, 7, 0},
                        {{7, 2, 7}, 9, 4, 5, 3, 11},   {{2}, 4, 1, 2, 0, 4}};
  for (DType dtype : {DType::f32, DType::f64})
    for (const Case& c : cases) {
      const int64_t nb = static_cast<int64_t>(c.len.size()), w = c.col + c.h * c.x + c.tail;
      std::vector<int> off(1, 0);
      for (int n : c.len) off.push_back(off.back() + n);
      const int64_t n = off.back();
      Tensor offsets = test::i32(off);
      Tensor rows = test::random({n, w}, dtype, ++seed);
      Tensor heads = test::random({nb, c.h, c.l, c.x}, dtype, ++seed);  // padding overwritten
      Tensor back = test::random({n, w}, dtype, ++seed);  // columns outside the heads kept
      const std::vector<double> rv = test::to_f64(rows);
      std::vector<double> ref(static_cast<size_t>(heads.numel()), 0.0), ref_back = test::to_f64(back);
      for (int64_t b = 0; b < nb; ++b)
        for (int64_t h = 0; h < c.h; ++h)
          for (int64_t t = 0; t < c.len[static_cast<size_t>(b)]; ++t)
            for (int64_t k = 0; k < c.x; ++k) {
              const size_t r = static_cast<size_t>((off[static_cast<size_t>(b)] + t) * w + c.col + h * c.x + k);
              ref[static_cast<size_t>(((b * c.h + h) * c.l + t) * c.x + k)] = rv[r];
              ref_back[r] = rv[r];
            }
      ops::unpack_heads(rows, offsets, heads, cpu, c.col);
      ops::pack_heads(heads, offsets, back, cpu, c.col);
      INFO(dtype_name(dtype) << " L " << c.l << " H " << c.h << " X " << c.x << " col " << c.col
                             << " width " << w);
      test::require_close({{"heads", heads, ref, {0, 0}}, {"round trip", back, ref_back, {0, 0}}});
    }
}

TEST_CASE("pack_heads and unpack_heads refuse heads past the rows' width", "[attention]") {
  Stream cpu(Device::cpu());
  Tensor rows = test::random({4, 6}, DType::f32, 1055), heads({2, 2, 3, 3}, DType::f32);
  Tensor offsets = test::i32({0, 2, 4});
  CHECK_NOTHROW(ops::unpack_heads(rows, offsets, heads, cpu, 0));
  CHECK_THROWS_WITH(ops::unpack_heads(rows, offsets, heads, cpu, 1),
                    Catch::Contains("W >= col + H * X = 1 + 6"));
  CHECK_THROWS_WITH(ops::pack_heads(heads, offsets, rows, cpu, -1), Catch::Contains("col"));
}

TEST_CASE("unpack_heads refuses offsets that are not sentences", "[attention]") {
  Stream cpu(Device::cpu());
  Tensor rows = test::random({4, 6}, DType::f32, 1060), heads({2, 2, 3, 3}, DType::f32);
  Tensor decreasing = test::i32({0, 3, 2}), too_long = test::i32({0, 4, 4}),
         past_rows = test::i32({0, 2, 5});
  for (const Tensor* off : {&decreasing, &too_long, &past_rows})
    CHECK_THROWS_WITH(ops::unpack_heads(rows, *off, heads, cpu),
                      Catch::Contains("is not a sentence of at most 3"));
  CHECK_THROWS_WITH(ops::unpack_heads(rows, test::i32({0, 1}), heads, cpu),
                    Catch::Contains("offsets"));
}

TEST_CASE("masked softmax forward and backward match float64", "[attention]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 1100;
  const int64_t nb = 3, nh = 2, tq = 5, tk = 7;
  const std::vector<int> len = {7, 3, 0};  // the last sentence shows no key at all
  Tensor k_len = test::i32(len);
  for (DType dtype : {DType::f32, DType::f64})
    for (bool causal : {false, true}) {
      const Shape shape{nb, nh, tq, tk};
      Tensor scores = test::random(shape, dtype, ++seed, -4, 4), dprobs = test::random(shape, dtype, ++seed);
      Tensor probs(shape, dtype), dscores(shape, dtype);
      const std::vector<double> p_ref =
          softmax_reference(test::to_f64(scores), len, causal, nb, nh, tq, tk);
      ops::masked_softmax_forward(scores, k_len, causal, probs, cpu);
      // Backward reference from the op's own probs, as the model uses it.
      const std::vector<double> pv = test::to_f64(probs), dpv = test::to_f64(dprobs);
      std::vector<double> ds_ref(pv.size());
      for (int64_t r = 0; r < nb * nh * tq; ++r) {
        double dot = 0;
        for (int64_t j = 0; j < tk; ++j) dot += pv[static_cast<size_t>(r * tk + j)] * dpv[static_cast<size_t>(r * tk + j)];
        for (int64_t j = 0; j < tk; ++j) {
          const size_t k = static_cast<size_t>(r * tk + j);
          ds_ref[k] = pv[k] * (dpv[k] - dot);
        }
      }
      ops::masked_softmax_backward(probs, dprobs, dscores, cpu);
      INFO(dtype_name(dtype) << " causal=" << causal);
      test::require_close({{"probs", probs, p_ref, test::tolerance_for(dtype, tk)},
                           {"dscores", dscores, ds_ref, test::tolerance_for(dtype, tk)}});
      // Hidden keys are exactly 0, and no row holds a NaN.
      int64_t hidden_nonzero = 0;
      for (size_t k = 0; k < pv.size(); ++k) hidden_nonzero += p_ref[k] == 0.0 && pv[k] != 0.0;
      CHECK(hidden_nonzero == 0);
      // In place: probs over scores, dscores over dprobs.
      ops::masked_softmax_forward(scores, k_len, causal, scores, cpu);
      ops::masked_softmax_backward(scores, dprobs, dprobs, cpu);
      test::require_close({{"probs (in place)", scores, p_ref, test::tolerance_for(dtype, tk)},
                           {"dscores (in place)", dprobs, ds_ref, test::tolerance_for(dtype, tk)}});
    }
}

TEST_CASE("masked softmax backward equals finite differences in double", "[attention]") {
  Stream cpu(Device::cpu());
  const int64_t nb = 2, nh = 2, tq = 4, tk = 5;
  Tensor k_len = test::i32({3, 5});
  for (bool causal : {false, true}) {
    const Shape shape{nb, nh, tq, tk};
    Tensor s = test::random(shape, DType::f64, causal ? 61 : 62, -2, 2);
    Tensor w = test::random(shape, DType::f64, 63);
    Tensor probs(shape, DType::f64), ds(shape, DType::f64);
    ops::masked_softmax_forward(s, k_len, causal, probs, cpu);
    ops::masked_softmax_backward(probs, w, ds, cpu);
    auto loss = [&] {
      ops::masked_softmax_forward(s, k_len, causal, probs, cpu);
      return test::weighted_sum(w, probs);
    };
    std::vector<double> numeric = test::finite_difference(s, loss);
    INFO("causal=" << causal);
    test::require_close({{"dscores vs finite differences", ds, numeric, {1e-8, 1e-7}}});
  }
}

TEST_CASE("attention ops reject bad shapes, dtypes and lengths", "[attention]") {
  Stream cpu(Device::cpu());
  Tensor s({2, 1, 3, 4}, DType::f32), p({2, 1, 3, 4}, DType::f32);
  Tensor len = test::i32({4, 5}), len1 = test::i32({4}), flen({2}, DType::f32);
  REQUIRE_THROWS_WITH(ops::masked_softmax_forward(s, len, false, p, cpu),
                      Catch::Contains("masked_softmax_forward: k_lengths[1] is 5, outside [0, 4]"));
  REQUIRE_THROWS_WITH(ops::masked_softmax_forward(s, len1, false, p, cpu),
                      Catch::Contains("masked_softmax_forward: k_lengths is i32 (1) on cpu but must be (2)"));
  REQUIRE_THROWS_WITH(ops::masked_softmax_forward(s, flen, false, p, cpu),
                      Catch::Contains("masked_softmax_forward: k_lengths is f32 but must be i32"));
  Tensor s3({2, 3, 4}, DType::f32);
  REQUIRE_THROWS_WITH(ops::masked_softmax_forward(s3, len, true, s3, cpu),
                      Catch::Contains("scores is f32 (2, 3, 4) on cpu but must be (B, H, Tq, Tk)"));
  Tensor p64({2, 1, 3, 4}, DType::f64);
  REQUIRE_THROWS_WITH(ops::masked_softmax_backward(p, p64, p, cpu),
                      Catch::Contains("masked_softmax_backward: probs is f32 (2, 1, 3, 4) on cpu but dprobs is f64"));
  Tensor y({2, 1, 3, 4}, DType::f32);
  REQUIRE_THROWS_WITH(ops::permute_0213(s, y, cpu),
                      Catch::Contains("permute_0213: y is f32 (2, 1, 3, 4) on cpu but must be (2, 3, 1, 4)"));
}
