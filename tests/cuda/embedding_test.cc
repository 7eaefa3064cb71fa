// CUDA token embeddings and position tables against the CPU ops: forward and
// backward, every activation dtype, the mixed-precision pairs (f32 tables
// and table gradients beside bf16/f16 activations), repeated ids, and the
// CUDA-only rule that an invalid id gives a zero row and adds nothing.
// Inputs are drawn in the dtype under test and handed to the CPU in f64.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "kernels/ops.h"
#include "tests/support.h"

using namespace tfm;

namespace {

struct Precision {
  DType act, param;  // activations; tables and table gradients
};
const Precision kPrecisions[] = {{DType::f32, DType::f32},  {DType::bf16, DType::bf16},
                                 {DType::f16, DType::f16},  {DType::bf16, DType::f32},
                                 {DType::f16, DType::f32}};

// n ids in [0, vocab), with repeats.
std::vector<double> random_id_values(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<double> u = test::to_f64(test::random({n}, DType::f64, seed, 0.0f, 1.0f));
  for (double& v : u) v = std::min<double>(vocab - 1, std::floor(v * static_cast<double>(vocab)));
  return u;
}

int64_t most_repeats(const std::vector<double>& ids) {
  std::map<double, int64_t> count;
  int64_t most = 1;
  for (double id : ids) most = std::max(most, ++count[id]);
  return most;
}

}  // namespace

TEST_CASE("cuda embedding forward and backward match the cpu", "[embedding]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 7100;
  const float scale = 3.5f;
  // (N, V, D): tiny, odd, and one large.
  const std::array<int64_t, 3> sizes[] = {
      {1, 1, 1}, {17, 11, 13}, {300, 50, 515}, {4096, 1000, 512}};
  for (const Precision& pr : kPrecisions)
    for (auto [n, vocab, d] : sizes) {
      const std::vector<double> idv = random_id_values(n, vocab, ++seed);
      Tensor ids = test::from_f64(idv, {n}, DType::i32);
      Tensor table = test::random({vocab, d}, pr.param, ++seed);
      Tensor dout = test::random({n, d}, pr.act, ++seed);
      Tensor dtable = test::random({vocab, d}, pr.param, ++seed);  // += onto this

      Tensor g_ids = test::to_device(ids, gpu), g_table = test::to_device(table, gpu);
      Tensor g_dout = test::to_device(dout, gpu), g_dtable = test::to_device(dtable, gpu);
      Tensor g_out({n, d}, pr.act, gpu);
      ops::embedding_forward(g_ids, g_table, scale, g_out, cuda);
      ops::embedding_backward(g_ids, g_dout, scale, g_dtable, cuda);

      Tensor table64 = test::cast(table, DType::f64), dout64 = test::cast(dout, DType::f64);
      Tensor dtable64 = test::cast(dtable, DType::f64), out64({n, d}, DType::f64);
      ops::embedding_forward(ids, table64, scale, out64, cpu);
      ops::embedding_backward(ids, dout64, scale, dtable64, cpu);
      cuda.synchronize();

      INFO(dtype_name(pr.act) << " activations, " << dtype_name(pr.param) << " table, (N, V, D) = ("
                              << n << ", " << vocab << ", " << d << ")");
      // dtable rows gather up to most_repeats(ids) additions, in f32, rounded
      // once to dtable's dtype.
      test::require_close(
          {{"out", g_out, test::to_f64(out64), test::tolerance_for(pr.act)},
           {"dtable", g_dtable, test::to_f64(dtable64),
            test::tolerance_for(pr.param, most_repeats(idv) + 1)}});
    }
}

TEST_CASE("cuda embedding writes zero rows for invalid ids and adds nothing for them",
          "[embedding]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu);
  const int64_t vocab = 5, d = 33;
  Tensor ids = test::from_f64({2, -1, 5, 1 << 30, 0}, {5}, DType::i32);
  Tensor table = test::random({vocab, d}, DType::f32, 7190);
  Tensor dout = test::random({5, d}, DType::f32, 7191);
  Tensor dtable = test::random({vocab, d}, DType::f32, 7192);
  Tensor g_ids = test::to_device(ids, gpu), g_table = test::to_device(table, gpu);
  Tensor g_dout = test::to_device(dout, gpu), g_dtable = test::to_device(dtable, gpu);
  Tensor g_out({5, d}, DType::f32, gpu);
  ops::embedding_forward(g_ids, g_table, 2.0f, g_out, cuda);
  ops::embedding_backward(g_ids, g_dout, 2.0f, g_dtable, cuda);
  cuda.synchronize();

  const std::vector<double> out = test::to_f64(g_out), tab = test::to_f64(table);
  const std::vector<double> dtab = test::to_f64(g_dtable), dtab0 = test::to_f64(dtable);
  const std::vector<double> dv = test::to_f64(dout);
  const int64_t id_of_row[] = {2, -1, -1, -1, 0};
  for (int64_t n = 0; n < 5; ++n)
    for (int64_t c = 0; c < d; ++c) {
      const int64_t id = id_of_row[n];
      const double want = id < 0 ? 0.0 : 2.0 * tab[static_cast<size_t>(id * d + c)];
      INFO("out[" << n << ", " << c << "]");
      REQUIRE(out[static_cast<size_t>(n * d + c)] == want);  // one f32 multiply: exact
    }
  // Only rows 2 and 0 of dtable change, by 2 * dout of rows 0 and 4.
  std::vector<double> want = dtab0;
  for (int64_t c = 0; c < d; ++c) {
    want[static_cast<size_t>(2 * d + c)] += 2.0 * dv[static_cast<size_t>(0 * d + c)];
    want[static_cast<size_t>(0 * d + c)] += 2.0 * dv[static_cast<size_t>(4 * d + c)];
  }
  test::require_close({{"dtable", g_dtable, want, test::tolerance_for(DType::f32)}});
  for (int64_t r : {1, 3, 4})
    for (int64_t c = 0; c < d; ++c)
      REQUIRE(dtab[static_cast<size_t>(r * d + c)] == dtab0[static_cast<size_t>(r * d + c)]);
}

TEST_CASE("cuda position add and backward match the cpu", "[embedding]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 7200;
  struct Size {
    int64_t b, t, d, p, offset;
  };
  const Size sizes[] = {
      {1, 1, 1, 1, 0}, {3, 5, 7, 9, 4}, {2, 17, 515, 40, 3}, {64, 100, 512, 128, 0}};
  for (const Precision& pr : kPrecisions)
    for (const Size& s : sizes) {
      Tensor x = test::random({s.b, s.t, s.d}, pr.act, ++seed);
      Tensor table = test::random({s.p, s.d}, pr.param, ++seed);
      Tensor dx = test::random({s.b, s.t, s.d}, pr.act, ++seed);
      Tensor dtable = test::random({s.p, s.d}, pr.param, ++seed);

      Tensor g_x = test::to_device(x, gpu), g_table = test::to_device(table, gpu);
      Tensor g_dx = test::to_device(dx, gpu), g_dtable = test::to_device(dtable, gpu);
      ops::position_add(g_x, g_table, s.offset, cuda);
      ops::position_backward(g_dx, s.offset, g_dtable, cuda);

      Tensor x64 = test::cast(x, DType::f64), table64 = test::cast(table, DType::f64);
      Tensor dx64 = test::cast(dx, DType::f64), dtable64 = test::cast(dtable, DType::f64);
      ops::position_add(x64, table64, s.offset, cpu);
      ops::position_backward(dx64, s.offset, dtable64, cpu);
      cuda.synchronize();

      INFO(dtype_name(pr.act) << " activations, " << dtype_name(pr.param) << " table, (B, T, D) = ("
                              << s.b << ", " << s.t << ", " << s.d << "), P " << s.p
                              << ", offset " << s.offset);
      test::require_close({{"x", g_x, test::to_f64(x64), test::tolerance_for(pr.act)},
                           {"dtable", g_dtable, test::to_f64(dtable64),
                            test::tolerance_for(pr.param, s.b)}});
    }
}
