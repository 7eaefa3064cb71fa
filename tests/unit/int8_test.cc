// int8 inference on the CPU (ops.h, "int8"; libcore/model/int8.h): the
// quantization's values, the GEMM's exact integer sums and its float
// epilogue against the formula written out here, the AVX2 path against the
// portable one, a row's bits at any row count and position, and the model:
// the incremental decoder in int8 against the full forward in int8, both
// near fp32. (Beam search's batch invariance in int8: batch_invariance_test.cc.)
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm_int8.h"
#include "kernels/ops.h"
#include "libcore/decode/incremental.h"
#include "libcore/model/int8.h"
#include "libcore/model/transformer.h"
#include "tests/support.h"

using namespace tfm;

namespace {

struct Quantized {
  std::vector<int8_t> values;
  std::vector<float> scales;
  std::vector<int32_t> sums;
  int64_t rows, cols, ld;
  std::vector<int32_t> panels;  // packed (ops::pack_int8_panels): read instead of values' copy
  ops::Int8Matrix matrix() const {
    return {values.data(), scales.data(), sums.data(), rows, cols, ld, panels.empty() ? nullptr : panels.data()};
  }
};

Quantized packed(Quantized q) {
  q.panels.assign(static_cast<size_t>(ops::panels_floats(q.rows, q.ld / 4)), 77);  // padding must come back 0
  ops::pack_int8_panels(q.values.data(), q.rows, q.ld, q.panels.data());
  return q;
}

Quantized quantize(const Tensor& w) {
  Quantized q{{}, {}, {}, w.shape()[0], w.shape()[1], ops::int8_ld(w.shape()[1]), {}};
  q.values.assign(static_cast<size_t>(q.rows * q.ld), 99);  // padding must come back 0
  q.scales.resize(static_cast<size_t>(q.rows));
  q.sums.resize(static_cast<size_t>(q.rows));
  ops::quantize_int8(w, q.values.data(), q.ld, q.scales.data(), q.sums.data());
  return q;
}

// x's rows as gemm_int8 quantizes them (ops.h): to [-63, 63], written out
// here rather than by the library's quantize_row_int8.
Quantized quantize_input(const Tensor& x) {
  Quantized q{{}, {}, {}, x.shape()[0], x.shape()[1], ops::int8_ld(x.shape()[1]), {}};
  q.values.assign(static_cast<size_t>(q.rows * q.ld), 0);
  const float* v = x.data_as<float>();
  for (int64_t i = 0; i < q.rows; ++i) {
    float amax = 0.0f;
    for (int64_t p = 0; p < q.cols; ++p) amax = std::max(amax, std::abs(v[i * q.cols + p]));
    q.scales.push_back(amax / 63.0f);
    for (int64_t p = 0; p < q.cols && amax > 0.0f; ++p)
      q.values[static_cast<size_t>(i * q.ld + p)] =
          static_cast<int8_t>(std::clamp(std::nearbyint(v[i * q.cols + p] * (63.0f / amax)), -63.0f, 63.0f));
  }
  return q;
}

// act(x W^T + b) as ops.h writes it: x quantized by rows, the sum in
// int64, the epilogue in f32 in the stated order.
std::vector<float> formula(const Tensor& x, const Quantized& w, const float* bias, bool relu) {
  const Quantized qx = quantize_input(x);
  std::vector<float> y(static_cast<size_t>(qx.rows * w.rows));
  for (int64_t i = 0; i < qx.rows; ++i)
    for (int64_t j = 0; j < w.rows; ++j) {
      int64_t sum = 0;
      for (int64_t p = 0; p < w.cols; ++p)
        sum += int64_t{qx.values[static_cast<size_t>(i * qx.ld + p)]} * w.values[static_cast<size_t>(j * w.ld + p)];
      const float s = qx.scales[static_cast<size_t>(i)] * w.scales[static_cast<size_t>(j)];
      float v = static_cast<float>(sum) * s;
      if (bias) v = v + bias[j];
      y[static_cast<size_t>(i * w.rows + j)] = relu ? std::max(v, 0.0f) : v;
    }
  return y;
}

std::vector<float> run(const Tensor& x, const Quantized& w, const Tensor* bias, bool relu,
                       ops::cpu::RowGemmPath path = ops::cpu::RowGemmPath::best,
                       ops::cpu::Int8Products products = ops::cpu::Int8Products::best) {
  const int64_t m = x.shape()[0];
  std::vector<float> y(static_cast<size_t>(m * w.rows), -7.0f);
  ops::cpu::gemm_int8(x.data_as<float>(), m, w.cols, w.matrix(), y.data(), w.rows,
                      bias ? bias->data_as<float>() : nullptr, relu, path, products);
  return y;
}

}  // namespace

TEST_CASE("quantize_int8 rounds each row by its largest magnitude, ties to even", "[int8]") {
  Tensor w({3, 5}, DType::f32);
  const float v[15] = {127.0f, 63.5f, -0.5f, 1.5f, 2.5f,  // scale 1: ties to even
                       0, 0, 0, 0, 0,                     // a zero row
                       -4.0f, 3.0f, 1.0f, 0.0f, 0.02f};   // x 31.75: 95.25, 31.75, 0.635
  std::memcpy(w.data_as<float>(), v, sizeof v);
  const Quantized q = quantize(w);
  CHECK(q.ld == 32);
  CHECK(q.scales[0] == 1.0f);
  CHECK(q.scales[1] == 0.0f);
  CHECK(q.scales[2] == 4.0f / 127.0f);
  const int8_t row0[5] = {127, 64, 0, 2, 2}, row2[5] = {-127, 95, 32, 0, 1};
  for (int p = 0; p < 5; ++p) {
    CHECK(q.values[static_cast<size_t>(p)] == row0[p]);
    CHECK(q.values[static_cast<size_t>(32 + p)] == 0);
    CHECK(q.values[static_cast<size_t>(64 + p)] == row2[p]);
  }
  for (int64_t p = 5; p < 32; ++p) CHECK(q.values[static_cast<size_t>(p)] == 0);  // padding
  CHECK(q.sums == std::vector<int32_t>{127 + 64 + 2 + 2, 0, -127 + 95 + 32 + 1});
  Tensor bad({1, 2}, DType::f32);
  bad.data_as<float>()[0] = INFINITY;
  CHECK(std::isnan(quantize(bad).scales[0]));
}

TEST_CASE("quantize_int8: the AVX2 and the portable path give the same bytes and scales", "[int8]") {
  uint64_t seed = 900;
  for (int64_t n : {1, 7, 8, 31, 32, 33, 100, 512, 2048}) {
    const Tensor v = test::random({1, n}, DType::f32, ++seed, -5.0f, 5.0f);
    const int64_t ld = ops::int8_ld(n);
    std::vector<int8_t> a(static_cast<size_t>(ld), 1), b(static_cast<size_t>(ld), 2);
    for (int limit : {127, ops::kInt8InputLimit}) {
      const float sa = ops::cpu::quantize_row_int8(v.data_as<float>(), n, a.data(), ld, true, limit);
      const float sb = ops::cpu::quantize_row_int8(v.data_as<float>(), n, b.data(), ld, false, limit);
      INFO("n " << n << ", limit " << limit);
      CHECK(sa == sb);
      CHECK(a == b);
      CHECK(*std::max_element(a.begin(), a.end()) <= limit);
      CHECK(*std::min_element(a.begin(), a.end()) >= -limit);
    }
  }
  std::vector<float> nan_row(40, 1.0f);
  nan_row[35] = NAN;  // past the vector part: the tail must catch it too
  std::vector<int8_t> q(64);
  for (bool simd : {true, false}) {
    CHECK(std::isnan(ops::cpu::quantize_row_int8(nan_row.data(), 40, q.data(), 64, simd)));
    nan_row[35] = 1.0f;
    nan_row[3] = NAN;
    CHECK(std::isnan(ops::cpu::quantize_row_int8(nan_row.data(), 40, q.data(), 64, simd)));
    nan_row[3] = 1.0f;
    nan_row[35] = NAN;
  }
}

TEST_CASE("gemm_int8 is the formula, bit for bit, on the AMX, VNNI, AVX-512BW, AVX2 and portable paths, W packed or not", "[int8]") {
  using ops::cpu::RowGemmPath;
  const RowGemmPath have = ops::cpu::gemm_int8_path();
  if (have != RowGemmPath::avx512) WARN("this CPU has no AVX-512BW: gemm_int8's AVX-512 path is not checked here");
  if (!ops::cpu::gemm_int8_amx()) WARN("this CPU (or its kernel) has no AMX tiles: gemm_int8's AMX path is not checked here");
  if (!ops::cpu::gemm_int8_vnni()) WARN("this CPU has no AVX-512 VNNI: gemm_int8's VNNI tile is not checked here");
  // n: blocks of one panel and of two (AVX-512), the second full or short;
  // m: tiles of 4 and 12 and their tails, AMX's groups of 32 and 16 and
  // their tails; k: multiples of 64 (AMX) and not.
  struct Case { int64_t m, n, k; };
  const Case cases[] = {{1, 1, 1}, {3, 7, 13}, {5, 33, 70}, {2, 4, 32}, {17, 64, 128}, {64, 512, 512},
                        {9, 4000, 128}, {4, 40, 2048}, {30, 50, 31}, {25, 96, 64}, {33, 17, 192},
                        {128, 48, 512}, {16, 16, 64}};
  uint64_t seed = 700;
  for (const Case& c : cases) {
    INFO("m " << c.m << " n " << c.n << " k " << c.k);
    const Tensor x = test::random({c.m, c.k}, DType::f32, ++seed, -3.0f, 3.0f);
    const Tensor w = test::random({c.n, c.k}, DType::f32, ++seed, -0.2f, 0.2f);
    const Tensor b = test::random({c.n}, DType::f32, ++seed);
    const Quantized q = quantize(w), qp = packed(q);
    for (bool relu : {false, true}) {
      const std::vector<float> want = formula(x, q, b.data_as<float>(), relu);
      for (const RowGemmPath path : {RowGemmPath::portable, RowGemmPath::avx2, RowGemmPath::avx512}) {
        if (static_cast<int>(path) > static_cast<int>(have)) continue;
        using ops::cpu::Int8Products;
        for (const Int8Products products : {Int8Products::best, Int8Products::vnni, Int8Products::bw}) {
          if (products != Int8Products::best && path != RowGemmPath::avx512) continue;
          INFO(ops::cpu::row_gemm_path_name(path) << " products " << static_cast<int>(products)
                                                  << (relu ? ", relu" : ""));
          CHECK(test::same_bits(run(x, q, &b, relu, path, products), want));
          CHECK(test::same_bits(run(x, qp, &b, relu, path, products), want));
        }
      }
    }
    CHECK(test::same_bits(run(x, q, nullptr, false), formula(x, q, nullptr, false)));
    // And near the f32 product: each factor is within half a step (1/63 and 1/127) of its row's largest.
    const std::vector<float> got = run(x, q, nullptr, false);
    double worst = 0;
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double exact = 0;
        for (int64_t p = 0; p < c.k; ++p)
          exact += double{x.data_as<float>()[i * c.k + p]} * w.data_as<float>()[j * c.k + p];
        worst = std::max(worst, std::abs(exact - got[static_cast<size_t>(i * c.n + j)]));
      }
    CHECK(worst <= 3.0 * 0.2 * (0.5 / 63.0 + 0.5 / 127.0) * 3.0 * std::sqrt(static_cast<double>(c.k)) + 1e-6);
  }
}

TEST_CASE("gemm_int8 computes a row the same at any row count, position and thread count", "[int8][invariance]") {
  const int64_t n = 300, k = 96;
  const Tensor row = test::random({1, k}, DType::f32, 41);
  const Quantized q = quantize(test::random({n, k}, DType::f32, 42));
  std::vector<float> first;
  const int threads = omp_get_max_threads();
  for (int t : {1, threads})
    for (int64_t m : {1, 2, 3, 8, 33, 64})
      for (int64_t at : {int64_t{0}, m / 2, m - 1}) {
        omp_set_num_threads(t);
        Tensor x = test::random({m, k}, DType::f32, static_cast<uint64_t>(1000 + m));
        std::memcpy(x.data_as<float>() + at * k, row.data_as<float>(), sizeof(float) * k);
        Tensor y({m, n}, DType::f32);
        ops::gemm_int8(x, q.matrix(), y, Stream(Device::cpu()));
        const std::vector<float> got(y.data_as<float>() + at * n, y.data_as<float>() + (at + 1) * n);
        if (first.empty()) first = got;
        INFO("threads " << t << ", rows " << m << ", at " << at);
        CHECK(test::same_bits(got, first));
      }
  omp_set_num_threads(threads);
}

TEST_CASE("gemm_int8 names the wrong shape", "[int8]") {
  const Quantized q = quantize(test::random({4, 8}, DType::f32, 5));
  Tensor x({2, 7}, DType::f32), y({2, 4}, DType::f32);
  CHECK_THROWS_WITH(ops::gemm_int8(x, q.matrix(), y, Stream(Device::cpu())),
                    Catch::Contains("gemm_int8: x is (2, 7) but W is 4 x 8"));
  Tensor x2({2, 8}, DType::f32), y2({3, 4}, DType::f32);
  CHECK_THROWS_WITH(ops::gemm_int8(x2, q.matrix(), y2, Stream(Device::cpu())),
                    Catch::Contains("y is (3, 4)"));
}

TEST_CASE("int8: the incremental decoder agrees with the full forward, both near fp32", "[int8][decode]") {
  ModelLimits limits;
  limits.max_tokens = 96;
  limits.max_len = 12;
  ModelConfig c = ModelConfig::preset("tiny");
  c.parse("vocab_size = 29\nd_model = 32\nd_ff = 48\nheads = 2\nmax_positions = 24");
  const std::vector<std::vector<int32_t>> sources = {{5, 6, 7, 8, 9}, {10, 4}, {11, 12, 13, 27}};
  const std::vector<std::vector<int32_t>> prefixes = {{4, 5}, {6, 7}, {8, 9}};
  Transformer fp32(c, limits, Device::cpu());
  fp32.init(11);
  const std::vector<double> want = test::to_f64(fp32.log_probs(HostBatch::from_pairs(sources, prefixes)));
  Transformer int8(c, limits, Device::cpu());
  int8.init(11);
  int8.quantize_int8();
  CHECK(int8.int8_weights() != nullptr);
  CHECK(int8.memory_report().find("int8 weights") != std::string::npos);
  const HostBatch batch = HostBatch::from_pairs(sources, prefixes);
  const std::vector<double> full = test::to_f64(int8.log_probs(batch));
  double near = 0;
  for (size_t i = 0; i < want.size(); ++i) near = std::max(near, std::abs(want[i] - full[i]));
  INFO("int8 vs fp32, full forward: " << near);
  CHECK(near > 0);     // it did run in int8
  CHECK(near < 0.1);   // and stayed near

  // The decoder, position by position, over the same prefixes.
  IncrementalDecoder dec(int8, {.sentences = 3, .src_tokens = 15, .src_len = 5, .rows = 3, .steps = 3});
  dec.start(sources, 3, 3);
  const int64_t V = c.vocab_size;
  double worst = 0;
  for (int64_t t = 0; t < 3; ++t) {
    std::vector<IncrementalDecoder::Row> rows;
    for (int32_t s = 0; s < 3; ++s)
      rows.push_back({s, s, t == 0 ? kBosId : prefixes[static_cast<size_t>(s)][static_cast<size_t>(t - 1)]});
    dec.step(rows);
    const std::vector<double> got = test::to_f64(dec.log_probs());
    for (int64_t s = 0; s < 3; ++s)
      for (int64_t v = 0; v < V; ++v)
        worst = std::max(worst, std::abs(got[static_cast<size_t>(s * V + v)] -
                                         full[static_cast<size_t>((s * batch.tgt_len + t) * V + v)]));
  }
  INFO("incremental vs full, both int8: " << worst);
  CHECK(worst < 1e-3);
  CHECK_THROWS_WITH(int8.forward_backward(batch, TrainStep{}), Catch::Contains("does not train"));
}
