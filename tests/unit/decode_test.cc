// CPU decoding ops (kernels/cpu/decode.cc) against float64 references:
// attention over gathered keys (groups, index lists of odd lengths, empty
// lists, the optional weights), the top-k log-softmax (ties, k = V), and
// that a row's result does not change with the rows around it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

namespace {

struct GatherCase {
  int64_t n, h, k, e, pool, list;  // N, H, K, E, P, L
  std::vector<int> lengths;        // per group (G = lengths.size())
  std::vector<int> groups;         // per row
};

struct GatherRef {
  std::vector<double> out, probs;
};

GatherRef gather_reference(const GatherCase& g, const std::vector<double>& q,
                           const std::vector<double>& keys, const std::vector<double>& values,
                           const std::vector<int>& index, double scale) {
  GatherRef ref{std::vector<double>(static_cast<size_t>(g.n * g.h * g.e), 0.0),
                std::vector<double>(static_cast<size_t>(g.n * g.h * g.list), 0.0)};
  for (int64_t r = 0; r < g.n; ++r)
    for (int64_t h = 0; h < g.h; ++h) {
      const int grp = g.groups[static_cast<size_t>(r)];
      const int64_t len = g.lengths[static_cast<size_t>(grp)];
      std::vector<double> s(static_cast<size_t>(len));
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < len; ++j) {
        const int64_t p = index[static_cast<size_t>(grp * g.list + j)];
        double d = 0;
        for (int64_t c = 0; c < g.k; ++c)
          d += q[static_cast<size_t>((r * g.h + h) * g.k + c)] * keys[static_cast<size_t>((p * g.h + h) * g.k + c)];
        s[static_cast<size_t>(j)] = scale * d;
        mx = std::max(mx, scale * d);
      }
      for (double& x : s) sum += std::exp(x - mx);
      for (int64_t j = 0; j < len; ++j) {
        const double p = std::exp(s[static_cast<size_t>(j)] - mx) / sum;
        ref.probs[static_cast<size_t>((r * g.h + h) * g.list + j)] = p;
        const int64_t row = index[static_cast<size_t>(grp * g.list + j)];
        for (int64_t c = 0; c < g.e; ++c)
          ref.out[static_cast<size_t>((r * g.h + h) * g.e + c)] += p * values[static_cast<size_t>((row * g.h + h) * g.e + c)];
      }
    }
  return ref;
}

}  // namespace

TEST_CASE("attention_gather matches float64", "[decode]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 12000;
  const GatherCase cases[] = {
      {3, 2, 5, 3, 7, 4, {4, 1, 0}, {0, 1, 2}},                // an empty list gives zeros
      {6, 3, 8, 8, 11, 9, {9, 5}, {1, 1, 0, 0, 1, 0}},         // rows share lists (beams)
      {5, 8, 64, 64, 40, 33, {33, 17, 1, 32, 20}, {4, 3, 2, 1, 0}},  // base-sized heads
      {4, 4, 32, 32, 20, 19, {19, 7}, {0, 1, 1, 0}},              // the demo model's heads
      {3, 2, 16, 16, 17, 17, {17, 16}, {0, 1, 0}},                // one vector a head
      {4, 2, 128, 128, 30, 29, {29, 16}, {0, 1, 1, 0}},           // the widest register path
      {3, 2, 144, 24, 12, 10, {10, 3}, {0, 1, 0}},                // too wide: the general path
  };
  for (DType dtype : {DType::f32, DType::f64})
    for (const GatherCase& g : cases) {
      const int64_t G = static_cast<int64_t>(g.lengths.size());
      Tensor q = test::random({g.n, g.h, g.k}, dtype, ++seed);
      Tensor keys = test::random({g.pool, g.h, g.k}, dtype, ++seed);
      Tensor values = test::random({g.pool, g.h, g.e}, dtype, ++seed);
      const std::vector<int> index = test::random_ints(G * g.list, g.pool, ++seed);
      Tensor idx = test::from_f64(std::vector<double>(index.begin(), index.end()), {G, g.list}, DType::i32);
      Tensor out = test::random({g.n, g.h, g.e}, dtype, ++seed);  // written, not accumulated
      Tensor probs = test::random({g.n, g.h, g.list}, dtype, ++seed);
      const float scale = 0.37f;
      ops::attention_gather(q, keys, values, idx, test::i32(g.lengths), test::i32(g.groups), scale,
                            out, probs, cpu);
      const GatherRef ref = gather_reference(g, test::to_f64(q), test::to_f64(keys),
                                             test::to_f64(values), index, scale);
      INFO(dtype_name(dtype) << ", N " << g.n << ", L " << g.list);
      test::require_close({{"out", out, ref.out, test::tolerance_for(dtype, g.k + g.list)},
                           {"probs", probs, ref.probs, test::tolerance_for(dtype, g.k)}});
      // Without the weights, and with the rows in another order and number:
      // every row's bits stay.
      Tensor alone({1, g.h, g.e}, dtype);
      const int64_t last = g.n - 1;
      const std::vector<double> qv = test::to_f64(q);
      Tensor q_last = test::from_f64(std::vector<double>(qv.begin() + last * g.h * g.k, qv.end()),
                                     {1, g.h, g.k}, dtype);
      ops::attention_gather(q_last, keys, values, idx, test::i32(g.lengths),
                            test::i32({g.groups.back()}), scale, alone, {}, cpu);
      const std::vector<double> all = test::to_f64(out), one = test::to_f64(alone);
      CHECK(std::equal(one.begin(), one.end(), all.begin() + last * g.h * g.e));
    }
}

TEST_CASE("attention_gather gives each head the bits it gets alone", "[decode]") {
  // On AVX-512 the presets' head sizes weigh several heads' values at once
  // (attend_heads_zmm), whole groups and the heads left over; any count of
  // heads must give each head what it gets as the only one.
  Stream cpu(Device::cpu());
  uint64_t seed = 12500;
  for (int64_t k : {16, 32, 48, 64})
    for (int64_t nh : {1, 2, 3, 4, 5, 8, 9}) {
      const int64_t n = 3, pool = 23, list = 21;
      const std::vector<int> lengths = {21, 6}, groups = {0, 1, 0};
      Tensor q = test::random({n, nh, k}, DType::f32, ++seed);
      Tensor keys = test::random({pool, nh, k}, DType::f32, ++seed);
      Tensor values = test::random({pool, nh, k}, DType::f32, ++seed);
      const std::vector<int> index = test::random_ints(2 * list, pool, ++seed);
      Tensor idx = test::from_f64(std::vector<double>(index.begin(), index.end()), {2, list}, DType::i32);
      Tensor out({n, nh, k}, DType::f32), probs({n, nh, list}, DType::f32);
      ops::attention_gather(q, keys, values, idx, test::i32(lengths), test::i32(groups), 0.21f, out, probs, cpu);
      const std::vector<double> qv = test::to_f64(q), kv = test::to_f64(keys), vv = test::to_f64(values);
      const std::vector<double> all = test::to_f64(out), all_probs = test::to_f64(probs);
      // Head h of (rows, nh, k) as (rows, 1, k).
      auto head = [&](const std::vector<double>& x, int64_t rows, int64_t h) {
        std::vector<double> y;
        for (int64_t r = 0; r < rows; ++r)
          y.insert(y.end(), x.begin() + (r * nh + h) * k, x.begin() + (r * nh + h + 1) * k);
        return test::from_f64(y, {rows, 1, k}, DType::f32);
      };
      for (int64_t h = 0; h < nh; ++h) {
        Tensor one({n, 1, k}, DType::f32), one_probs({n, 1, list}, DType::f32);
        ops::attention_gather(head(qv, n, h), head(kv, pool, h), head(vv, pool, h), idx, test::i32(lengths),
                              test::i32(groups), 0.21f, one, one_probs, cpu);
        const std::vector<double> o = test::to_f64(one), p = test::to_f64(one_probs);
        INFO("K " << k << ", " << nh << " heads, head " << h);
        for (int64_t r = 0; r < n; ++r) {
          CHECK(std::equal(o.begin() + r * k, o.begin() + (r + 1) * k, all.begin() + (r * nh + h) * k));
          CHECK(std::equal(p.begin() + r * list, p.begin() + (r + 1) * list, all_probs.begin() + (r * nh + h) * list));
        }
      }
    }
}

TEST_CASE("attention_gather rejects indices outside the pool", "[decode]") {
  Stream cpu(Device::cpu());
  Tensor q = test::random({2, 1, 4}, DType::f32, 1), kv = test::random({3, 1, 4}, DType::f32, 2);
  Tensor out({2, 1, 4}, DType::f32);
  const Tensor bad = test::i32({0, 3}), good = test::i32({0, 1});
  const TensorView bad_index = bad.view().reshape({1, 2}), index = good.view().reshape({1, 2});
  REQUIRE_THROWS_WITH(ops::attention_gather(q, kv, kv, bad_index, test::i32({2}), test::i32({0, 0}),
                                            1.0f, out, {}, cpu),
                      Catch::Contains("outside the pool"));
  REQUIRE_THROWS_WITH(ops::attention_gather(q, kv, kv, index, test::i32({3}), test::i32({0, 0}),
                                            1.0f, out, {}, cpu),
                      Catch::Contains("lengths[0] is 3"));
  REQUIRE_THROWS_WITH(ops::attention_gather(q, kv, kv, index, test::i32({2}), test::i32({0, 1}),
                                            1.0f, out, {}, cpu),
                      Catch::Contains("groups[1] is 1"));
  REQUIRE_THROWS_WITH(ops::attention_gather(q, kv, kv, index, test::i32({2}), test::i32({0, 0}),
                                            1.0f, Tensor({2, 4}, DType::f32), {}, cpu),
                      Catch::Contains("out"));
}

TEST_CASE("log_softmax_topk matches float64, ties to the smaller id", "[decode]") {
  Stream cpu(Device::cpu());
  uint64_t seed = 12100;
  struct Case { int64_t n, v, k; };
  for (DType dtype : {DType::f32, DType::f64})
    for (const Case& c : {Case{1, 1, 1}, Case{3, 10, 10}, Case{5, 37, 8}, Case{2, 37000, 8}, Case{4, 300, 100}}) {
      Tensor logits = test::random({c.n, c.v}, dtype, ++seed, -8.0f, 8.0f);
      std::vector<double> x = test::to_f64(logits);
      if (c.v >= 10)  // ties: a repeated value at several ids
        for (int64_t r = 0; r < c.n; ++r)
          for (int64_t j : {int64_t(7), int64_t(3), c.v - 1}) x[static_cast<size_t>(r * c.v + j)] = 9.0;
      logits = test::from_f64(x, {c.n, c.v}, dtype);
      Tensor values({c.n, c.k}, dtype), ids({c.n, c.k}, DType::i32), lse({c.n}, dtype);
      ops::log_softmax_topk(logits, values, ids, lse, cpu);
      std::vector<double> want_values, want_lse;
      std::vector<int32_t> want_ids;
      for (int64_t r = 0; r < c.n; ++r) {
        const double* row = x.data() + r * c.v;
        double mx = *std::max_element(row, row + c.v), sum = 0;
        for (int64_t j = 0; j < c.v; ++j) sum += std::exp(row[j] - mx);
        want_lse.push_back(mx + std::log(sum));
        std::vector<int32_t> order(static_cast<size_t>(c.v));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
        for (int64_t i = 0; i < c.k; ++i) {
          want_ids.push_back(order[static_cast<size_t>(i)]);
          want_values.push_back(row[order[static_cast<size_t>(i)]] - want_lse.back());
        }
      }
      INFO(dtype_name(dtype) << ", N " << c.n << ", V " << c.v << ", k " << c.k);
      CHECK(std::vector<int32_t>(ids.data_as<int32_t>(), ids.data_as<int32_t>() + c.n * c.k) == want_ids);
      test::require_close({{"values", values, want_values, test::tolerance_for(dtype, c.v)},
                           {"lse", lse, want_lse, test::tolerance_for(dtype, c.v)}});
    }
  Tensor logits = test::random({2, 5}, DType::f32, 3);
  Tensor ids({2, 6}, DType::i32);
  REQUIRE_THROWS_WITH(ops::log_softmax_topk(logits, Tensor({2, 6}, DType::f32), ids, Tensor({2}, DType::f32), cpu),
                      Catch::Contains("1 <= k <= 5"));
}

TEST_CASE("extend_history grows each row's list from its parent's, at each row's position", "[decode]") {
  Stream cpu(Device::cpu());
  const int64_t R = 5, T = 6;
  // Three steps: step 0 has 2 rows (two sentences start), step 1 four
  // (rows 0, 0, 1, 1 continued), step 2 three (rows 3, 0 continued, and a
  // third sentence starting at position 0 beside them). Pool rows are
  // given by the step: here 10 t + r.
  Tensor a = Tensor::zeros({R, T}, DType::i32), b = Tensor::zeros({R, T}, DType::i32);
  Tensor lengths({R}, DType::i32);
  const auto prefix_of = [](const Tensor& t, int64_t n) {
    return TensorView(t.view().data(), t.dtype(), {n}, t.device());
  };
  const auto row = [&](const Tensor& h, int64_t r, int64_t n) {
    return std::vector<int32_t>(h.data_as<int32_t>() + r * T, h.data_as<int32_t>() + r * T + n);
  };
  const auto first = [](const Tensor& t, int64_t n) {
    return std::vector<int32_t>(t.data_as<int32_t>(), t.data_as<int32_t>() + n);
  };
  ops::extend_history(a, test::i32({9, 9}), test::i32({0, 0}), test::i32({0, 1}), b, prefix_of(lengths, 2), cpu);
  CHECK(row(b, 0, 1) == std::vector<int32_t>{0});
  CHECK(row(b, 1, 1) == std::vector<int32_t>{1});
  CHECK(first(lengths, 2) == std::vector<int32_t>{1, 1});
  ops::extend_history(b, test::i32({0, 0, 1, 1}), test::i32({1, 1, 1, 1}), test::i32({10, 11, 12, 13}), a,
                      prefix_of(lengths, 4), cpu);
  CHECK(row(a, 0, 2) == std::vector<int32_t>{0, 10});
  CHECK(row(a, 1, 2) == std::vector<int32_t>{0, 11});
  CHECK(row(a, 2, 2) == std::vector<int32_t>{1, 12});
  CHECK(row(a, 3, 2) == std::vector<int32_t>{1, 13});
  ops::extend_history(a, test::i32({3, 0, 77}), test::i32({2, 2, 0}), test::i32({20, 21, 22}), b,
                      prefix_of(lengths, 3), cpu);
  CHECK(row(b, 0, 3) == std::vector<int32_t>{1, 13, 20});
  CHECK(row(b, 1, 3) == std::vector<int32_t>{0, 10, 21});
  CHECK(row(b, 2, 1) == std::vector<int32_t>{22});  // its parent is not read at position 0
  CHECK(first(lengths, 3) == std::vector<int32_t>{3, 3, 1});

  const auto one = [&](const Tensor& prev, const Tensor& next, int position) {
    return ops::extend_history(prev, test::i32({0}), test::i32({position}), test::i32({40}), next,
                               prefix_of(lengths, 1), cpu);
  };
  REQUIRE_THROWS_WITH(ops::extend_history(b, test::i32({5}), test::i32({3}), test::i32({40}), a,
                                          prefix_of(lengths, 1), cpu),
                      Catch::Contains("parents[0] is 5, outside [0, 5)"));
  REQUIRE_THROWS_WITH(one(b, a, 6), Catch::Contains("positions[0] is 6, outside the lists' [0, 6)"));
  REQUIRE_THROWS_WITH(one(b, a, -1), Catch::Contains("positions[0] is -1"));
  REQUIRE_THROWS_WITH(one(a, a, 1), Catch::Contains("next is prev"));
  REQUIRE_THROWS_WITH(ops::extend_history(b, test::i32({0}), test::i32({1, 1}), test::i32({40}), a,
                                          prefix_of(lengths, 1), cpu),
                      Catch::Contains("positions"));

  // A thread's share of a step (IncrementalDecoder::queue_step): rows 1..2
  // of step 2 again, into a slice of the lists from row 1. The slice must
  // hold the rows and be as wide as prev.
  const TensorView slice(b.data_as<int32_t>() + T, DType::i32, {2, T}, Device::cpu());
  ops::extend_history(a, test::i32({0, 2}), test::i32({2, 2}), test::i32({31, 32}), slice, prefix_of(lengths, 2),
                      cpu);
  CHECK(row(b, 1, 3) == std::vector<int32_t>{0, 10, 31});
  CHECK(row(b, 2, 3) == std::vector<int32_t>{1, 12, 32});
  CHECK(row(b, 0, 3) == std::vector<int32_t>{1, 13, 20});  // untouched
  REQUIRE_THROWS_WITH(ops::extend_history(a, test::i32({0, 2, 1}), test::i32({2, 2, 2}), test::i32({1, 2, 3}), slice,
                                          prefix_of(lengths, 3), cpu),
                      Catch::Contains("with R' >= 3"));
  const TensorView narrow(b.data_as<int32_t>(), DType::i32, {R, T - 1}, Device::cpu());
  REQUIRE_THROWS_WITH(ops::extend_history(a, test::i32({0}), test::i32({2}), test::i32({3}), narrow,
                                          prefix_of(lengths, 1), cpu),
                      Catch::Contains("T as prev"));
}

TEST_CASE("scatter_columns writes rows where the index says, and checks it", "[decode]") {
  Stream cpu(Device::cpu());
  // x (3, 5): columns 1..3 of row r to row index[r] of y (6, 3).
  std::vector<double> xs(15);
  for (size_t j = 0; j < xs.size(); ++j) xs[j] = static_cast<double>(j);
  const Tensor x = test::from_f64(xs, {3, 5}, DType::f32);
  Tensor y = Tensor::zeros({6, 3}, DType::f32);
  ops::scatter_columns(x, 1, test::i32({4, 0, 2}), y, cpu);
  CHECK(test::to_f64(y) == std::vector<double>{6, 7, 8, 0, 0, 0, 11, 12, 13, 0, 0, 0, 1, 2, 3, 0, 0, 0});
  REQUIRE_THROWS_WITH(ops::scatter_columns(x, 1, test::i32({4, 6, 2}), y, cpu),
                      Catch::Contains("index[1] is 6, outside [0, 6)"));
  REQUIRE_THROWS_WITH(ops::scatter_columns(x, 3, test::i32({4, 0, 2}), y, cpu),
                      Catch::Contains("columns [3, 6)"));
  REQUIRE_THROWS_WITH(ops::scatter_columns(x, 1, test::i32({4, 0}), y, cpu), Catch::Contains("index"));
}
