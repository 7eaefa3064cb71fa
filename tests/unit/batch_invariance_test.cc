// Batch invariance on the CPU (tfm-decode): a sentence's n-best list and
// scores must not depend on which sentences share its batch, or how many.
//
// First the one place where it could fail: OpenBLAS's sgemm, which computes
// small products with separate kernels whose sums differ from its blocked
// kernels in the last bits. The same row is multiplied inside matrices of
// many row counts and positions; from ops::gemm_invariant_rows on, it must
// come out bit-identical (the decoder pads its GEMMs to that). Then the
// whole search, at batch sizes 1, 7 and 64, from a saved checkpoint.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "kernels/ops.h"
#include "libcore/decode/search.h"
#include "libcore/model/model_io.h"
#include "tests/support.h"

using namespace tfm;

namespace {

// Row `row` of x W^T + b computed inside an (m, k) matrix whose other rows
// are random; `row` is placed at position `at`.
std::vector<float> row_product(const Tensor& row, const Tensor& w, const Tensor& bias, int64_t m,
                               int64_t at, uint64_t seed) {
  const int64_t n = w.shape()[0], k = w.shape()[1];
  Tensor a = test::random({m, k}, DType::f32, seed);
  std::memcpy(a.data_as<float>() + at * k, row.data_as<float>(), sizeof(float) * static_cast<size_t>(k));
  Tensor c({m, n}, DType::f32);
  ops::GemmOptions o;
  o.trans_b = true;
  ops::gemm(a, w, c, o, Stream(Device::cpu()), bias);
  const float* p = c.data_as<float>() + at * n;
  return std::vector<float>(p, p + n);
}

}  // namespace

TEST_CASE("sgemm computes a row the same at any row count from gemm_invariant_rows on", "[invariance]") {
  // (n, k) of x W^T in the tiny and the base model: attention projections,
  // feed-forward in and out, output projection.
  struct Shape2 { int64_t n, k; };
  const Shape2 shapes[] = {{32, 32}, {64, 32}, {32, 64}, {512, 512}, {2048, 512}, {512, 2048}, {37000, 512}};
  const int threads = omp_get_max_threads();
  uint64_t seed = 9100;
  for (const Shape2& s : shapes) {
    Tensor w = test::random({s.n, s.k}, DType::f32, ++seed);
    Tensor bias = test::random({s.n}, DType::f32, ++seed);
    Tensor row = test::random({1, s.k}, DType::f32, ++seed);
    const int64_t floor = ops::gemm_invariant_rows(Device::cpu(), s.n, s.k);
    const std::vector<float> want = row_product(row, w, bias, floor, 0, ++seed);
    // Row counts from the floor up, the row first, in the middle and last;
    // with one thread and with all of them.
    std::vector<int64_t> counts = {floor, floor + 1, floor + 3, floor + 16};
    if (s.n * s.k <= 4096)  // the tiny model: every count up to 3 x the floor
      for (int64_t m = floor + 4; m < 3 * floor; ++m) counts.push_back(m);
    else if (s.n * s.k <= 2048 * 512)  // the base model's layers: a decoder batch's rows
      counts.insert(counts.end(), {64, 257});
    bool below_differs = false;
    for (int64_t m = 1; m < floor && !below_differs; ++m)
      below_differs = row_product(row, w, bias, m, 0, ++seed) != want;
    std::printf("  x W^T, n %5lld, k %4lld: invariant from %3lld rows%s\n", static_cast<long long>(s.n),
                static_cast<long long>(s.k), static_cast<long long>(floor),
                below_differs ? "; fewer rows give other last bits" : "");
    for (const int t : {1, threads}) {
      omp_set_num_threads(t);
      for (const int64_t m : counts)
        for (const int64_t at : {int64_t(0), m / 2, m - 1}) {
          INFO("n " << s.n << ", k " << s.k << ", " << m << " rows, row at " << at << ", " << t << " threads");
          CHECK(row_product(row, w, bias, m, at, ++seed) == want);
        }
    }
    omp_set_num_threads(threads);
  }
}

TEST_CASE("decoding gives the same n-best lists and scores at batch sizes 1, 7 and 64", "[invariance]") {
  // A random tiny model through a checkpoint, as tfm-decode loads it.
  const test::TempDir dir;
  {
    ModelLimits limits;
    limits.max_tokens = 64;
    limits.max_len = 16;
    Transformer model(ModelConfig::preset("tiny"), limits, Device::cpu());
    model.init(31);
    save_model(dir.file("tiny.bin"), model);
  }
  ModelLimits inference;
  inference.inference = true;
  auto model = load_model(dir.file("tiny.bin"), inference, Device::cpu());
  const int64_t V = model->config().vocab_size;
  std::vector<SearchRequest> requests;
  uint64_t r = 17;
  for (int i = 0; i < 64; ++i) {
    SearchRequest q;
    const int len = 1 + (i * 7) % 13;
    for (int j = 0; j < len; ++j) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      q.source.push_back(static_cast<int32_t>(4 + (r >> 33) % static_cast<uint64_t>(V - 4)));
    }
    q.max_len = len + 4;
    requests.push_back(q);
  }
  BeamSearchOptions o;
  o.beam_size = 4;
  o.n_best = 4;
  DecoderLimits dl;
  dl.sentences = 64;
  dl.src_len = 13;
  dl.src_tokens = 64 * 13;
  dl.rows = search_rows(64, o);
  dl.steps = search_steps(requests);
  IncrementalDecoder decoder(*model, dl);

  // Batches of `size` consecutive sentences of a shuffled order.
  auto decode_all = [&](size_t size, uint64_t shuffle) {
    std::vector<size_t> order(requests.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    for (size_t i = order.size() - 1; i > 0 && shuffle; --i) {
      shuffle = shuffle * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(order[i], order[(shuffle >> 33) % (i + 1)]);
    }
    std::vector<std::vector<Hypothesis>> out(requests.size());
    for (size_t b = 0; b < order.size(); b += size) {
      std::vector<SearchRequest> batch;
      for (size_t i = b; i < std::min(order.size(), b + size); ++i) batch.push_back(requests[order[i]]);
      auto got = beam_search(decoder, batch, o);
      for (size_t i = 0; i < got.size(); ++i) out[order[b + i]] = std::move(got[i]);
    }
    return out;
  };
  const auto one = decode_all(1, 0);
  int64_t hypotheses = 0;
  for (const auto& [size, shuffle] : {std::pair<size_t, uint64_t>{7, 5}, {64, 0}, {64, 11}}) {
    const auto got = decode_all(size, shuffle);
    for (size_t s = 0; s < requests.size(); ++s) {
      INFO("batch size " << size << ", sentence " << s);
      REQUIRE(got[s].size() == one[s].size());
      for (size_t i = 0; i < one[s].size(); ++i) {
        CHECK(got[s][i].tokens == one[s][i].tokens);
        CHECK(got[s][i].token_log_probs == one[s][i].token_log_probs);  // bit for bit
        CHECK(got[s][i].score == one[s][i].score);
        ++hypotheses;
      }
    }
  }
  CHECK(hypotheses == 3 * 64 * 4);
}
