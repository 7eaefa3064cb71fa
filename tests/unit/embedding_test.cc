// CPU token embeddings and position tables against float64 references in
// f32 and f64, their backward against finite differences in double, and
// bad ids and shapes.
#include <catch2/catch.hpp>

#include <functional>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

namespace {

// n ids in [0, vocab), with repeats (the backward's scatter must add them).
Tensor random_ids(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<double> u = test::to_f64(test::random({n}, DType::f64, seed, 0.0f, 1.0f));
  for (double& v : u) v = std::min<double>(vocab - 1, std::floor(v * static_cast<double>(vocab)));
  return test::from_f64(u, {n}, DType::i32);
}

}  // namespace

TEST_CASE("embedding forward and backward match float64", "[embedding]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 700;
  const float scale = 3.5f;  // sqrt(d_model) in the model
  // (N, V, D): odd, and one over the parallel threshold.
  const std::array<int64_t, 3> sizes[] = {{17, 11, 13}, {1, 1, 1}, {300, 50, 129}};
  for (DType dtype : {DType::f32, DType::f64})
    for (auto [n, vocab, d] : sizes) {
      Tensor ids = random_ids(n, vocab, ++seed);
      Tensor table = test::random({vocab, d}, dtype, ++seed);
      Tensor dout = test::random({n, d}, dtype, ++seed), dtable = test::random({vocab, d}, dtype, ++seed);
      Tensor out({n, d}, dtype);
      const std::vector<double> idv = test::to_f64(ids), tv = test::to_f64(table), dv = test::to_f64(dout);
      std::vector<double> out_ref(static_cast<size_t>(n * d)), dtable_ref = test::to_f64(dtable);
      int64_t max_repeat = 1;
      for (int64_t r = 0; r < n; ++r) {
        const auto id = static_cast<int64_t>(idv[static_cast<size_t>(r)]);
        for (int64_t j = 0; j < d; ++j) {
          out_ref[static_cast<size_t>(r * d + j)] = scale * tv[static_cast<size_t>(id * d + j)];
          dtable_ref[static_cast<size_t>(id * d + j)] += scale * dv[static_cast<size_t>(r * d + j)];
        }
        max_repeat = std::max<int64_t>(max_repeat, std::count(idv.begin(), idv.end(), idv[static_cast<size_t>(r)]));
      }
      ops::embedding_forward(ids, table, scale, out, cpu);
      ops::embedding_backward(ids, dout, scale, dtable, cpu);
      INFO(dtype_name(dtype) << " N=" << n << " V=" << vocab << " D=" << d);
      test::require_close({{"out", out, out_ref, test::tolerance_for(dtype)},
                           {"dtable (+=)", dtable, dtable_ref, test::tolerance_for(dtype, max_repeat)}});
    }
}

TEST_CASE("position add and backward match float64", "[embedding]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 800;
  // (B, T, D, P, offset)
  const std::array<int64_t, 5> sizes[] = {{3, 5, 7, 9, 2}, {2, 1, 4, 6, 5}, {16, 40, 65, 64, 3}};
  for (DType dtype : {DType::f32, DType::f64})
    for (auto [b, t, d, p, offset] : sizes) {
      Tensor x = test::random({b, t, d}, dtype, ++seed), table = test::random({p, d}, dtype, ++seed);
      Tensor dx = test::random({b, t, d}, dtype, ++seed), dtable = test::random({p, d}, dtype, ++seed);
      std::vector<double> x_ref = test::to_f64(x), dtable_ref = test::to_f64(dtable);
      const std::vector<double> tv = test::to_f64(table), dv = test::to_f64(dx);
      for (int64_t i = 0; i < b * t * d; ++i) {
        const int64_t row = (offset + (i / d) % t) * d + i % d;
        x_ref[static_cast<size_t>(i)] += tv[static_cast<size_t>(row)];
        dtable_ref[static_cast<size_t>(row)] += dv[static_cast<size_t>(i)];
      }
      Tensor x_at = test::cast(x, dtype);  // the same through the offset in memory
      ops::position_add(x, table, offset, cpu);
      ops::position_add_at(x_at, table, test::i32({static_cast<int>(offset)}), cpu);
      CHECK(test::to_f64(x_at) == test::to_f64(x));
      // And one offset per b: b's rows as position_add at that offset.
      Tensor x_rows = test::cast(x_at, dtype), x_each = test::cast(x_at, dtype);
      std::vector<int> offsets;
      for (int64_t i = 0; i < b; ++i) offsets.push_back(static_cast<int>((offset + i) % (p - t + 1)));
      ops::position_add_at(x_rows, table, test::i32(offsets), cpu);
      for (int64_t i = 0; i < b; ++i) {
        const size_t bytes = static_cast<size_t>(t * d) * dtype_size(dtype);
        const TensorView xi(static_cast<char*>(x_each.view().data()) + static_cast<size_t>(i) * bytes, dtype, {1, t, d},
                            Device::cpu());
        ops::position_add(xi, table, offsets[static_cast<size_t>(i)], cpu);
      }
      CHECK(test::to_f64(x_rows) == test::to_f64(x_each));
      ops::position_backward(dx, offset, dtable, cpu);
      INFO(dtype_name(dtype) << " B=" << b << " T=" << t << " D=" << d << " offset=" << offset);
      test::require_close({{"x (+=)", x, x_ref, test::tolerance_for(dtype)},
                           {"dtable (+=)", dtable, dtable_ref, test::tolerance_for(dtype, b)}});
    }
}

TEST_CASE("embedding and position backward equal finite differences in double", "[embedding]") {
  Stream cpu(Device::cpu());
  const int64_t n = 9, vocab = 5, d = 3;
  const float scale = 1.7f;
  Tensor ids = random_ids(n, vocab, 41);
  Tensor table = test::random({vocab, d}, DType::f64, 42), w = test::random({n, d}, DType::f64, 43);
  Tensor out({n, d}, DType::f64), dtable = Tensor::zeros({vocab, d}, DType::f64);
  ops::embedding_backward(ids, w, scale, dtable, cpu);
  auto loss = [&] {
    ops::embedding_forward(ids, table, scale, out, cpu);
    return test::weighted_sum(w, out);
  };
  // L = sum(w * (x + table[offset + t])) with x = 0 each time.
  const int64_t b = 2, t = 3, p = 6, offset = 2;
  Tensor ptable = test::random({p, d}, DType::f64, 44), pw = test::random({b, t, d}, DType::f64, 45);
  Tensor x({b, t, d}, DType::f64), dptable = Tensor::zeros({p, d}, DType::f64);
  ops::position_backward(pw, offset, dptable, cpu);
  auto ploss = [&] {
    std::fill_n(x.data_as<double>(), x.numel(), 0.0);
    ops::position_add(x, ptable, offset, cpu);
    return test::weighted_sum(pw, x);
  };
  test::require_close({{"dtable vs finite differences", dtable, test::finite_difference(table, loss), {1e-8, 1e-7}},
                       {"position dtable vs finite differences", dptable, test::finite_difference(ptable, ploss),
                        {1e-8, 1e-7}}});
}

TEST_CASE("embedding rejects out-of-range ids and bad shapes", "[embedding]") {
  Stream cpu(Device::cpu());
  Tensor table = test::random({11, 4}, DType::f32, 1), out({3, 4}, DType::f32);
  Tensor bad = test::from_f64({0, 11, 2}, {3}, DType::i32), neg = test::from_f64({0, 1, -1}, {3}, DType::i32);
  REQUIRE_THROWS_WITH(ops::embedding_forward(bad, table, 1.0f, out, cpu),
                      Catch::Contains("embedding_forward: ids[1] is 11, outside the vocabulary [0, 11)"));
  REQUIRE_THROWS_WITH(ops::embedding_forward(neg, table, 1.0f, out, cpu),
                      Catch::Contains("ids[2] is -1"));
  REQUIRE_THROWS_WITH(ops::embedding_backward(bad, out, 1.0f, table, cpu),
                      Catch::Contains("embedding_backward: ids[1] is 11"));
  Tensor ids = test::from_f64({0, 1, 2}, {3}, DType::i32), out5({3, 5}, DType::f32);
  REQUIRE_THROWS_WITH(ops::embedding_forward(ids, table, 1.0f, out5, cpu),
                      Catch::Contains("embedding_forward: out is f32 (3, 5) on cpu but must be (3, 4)"));
  Tensor fids({3}, DType::f32);
  REQUIRE_THROWS_WITH(ops::embedding_forward(fids, table, 1.0f, out, cpu),
                      Catch::Contains("embedding_forward: ids is f32 but must be i32"));
  Tensor x({2, 5, 4}, DType::f32);
  REQUIRE_THROWS_WITH(ops::position_add(x, table, 7, cpu),
                      Catch::Contains("position_add: positions 7 to 11 are outside the table's 11 rows"));
  REQUIRE_THROWS_WITH(ops::position_add_at(x, table, test::i32({7}), cpu),
                      Catch::Contains("position_add_at: positions 7 to 11 are outside the table's 11 rows"));
  REQUIRE_THROWS_WITH(ops::position_add_at(x, table, test::i32({1, 2, 3}), cpu),
                      Catch::Contains("position_add_at: offset"));
  REQUIRE_THROWS_WITH(ops::position_add_at(x, table, test::i32({1, 7}), cpu),
                      Catch::Contains("position_add_at: positions 7 to 11 are outside the table's 11 rows"));
  REQUIRE_THROWS_WITH(ops::position_backward(x, -1, table, cpu),
                      Catch::Contains("position_backward: positions -1 to 3"));
}
