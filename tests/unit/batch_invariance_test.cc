// Batch invariance on the CPU (tfm-decode): a sentence's n-best list and
// scores must not depend on which sentences share its batch, or how many.
//
// First the GEMM, the one op that could fail it: OpenBLAS's sgemm sums an
// element by its place in a register block (on the Zen / Haswell kernels a
// row's bits change with its position mod 12 and in the tails), so the
// decoder's products run with GemmOptions::row_invariant. The same row is
// multiplied inside matrices of many row counts and positions, with one
// thread and with all: it must come out bit-identical, the AVX2 path equal
// to the portable one, and near the float64 product. Then the whole search,
// at batch sizes 1, 7 and 64, from a saved checkpoint, in fp32 and in int8,
// with the decoder's steps split between threads and not.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "kernels/cpu/gemm_rows.h"
#include "kernels/ops.h"
#include "libcore/decode/search.h"
#include "libcore/model/int8.h"
#include "libcore/model/model_file.h"
#include "libcore/model/model_io.h"
#include "tests/support.h"

using namespace tfm;

namespace {

// Row `row` of act(x W^T + b) computed inside an (m, k) matrix whose other
// rows are random; `row` is placed at position `at`.
std::vector<float> row_product(const Tensor& row, const Tensor& w, const Tensor& bias, int64_t m,
                               int64_t at, uint64_t seed, bool relu = false) {
  const int64_t n = w.shape()[0], k = w.shape()[1];
  Tensor a = test::random({m, k}, DType::f32, seed);
  std::memcpy(a.data_as<float>() + at * k, row.data_as<float>(), sizeof(float) * static_cast<size_t>(k));
  Tensor c({m, n}, DType::f32);
  ops::GemmOptions o;
  o.trans_b = true;
  o.row_invariant = true;
  o.relu = relu;
  ops::gemm(a, w, c, o, Stream(Device::cpu()), bias);
  const float* p = c.data_as<float>() + at * n;
  return std::vector<float>(p, p + n);
}

}  // namespace

TEST_CASE("row-invariant GEMM computes a row the same at any row count and position", "[invariance]") {
  // (n, k) of x W^T in the tiny and the base model (attention projections,
  // feed-forward in and out, output projection), and odd sizes for the
  // tails of the tiles, the panels and their 8 x 8 copies.
  struct Shape2 { int64_t n, k; };
  const Shape2 shapes[] = {{32, 32}, {64, 32}, {96, 64}, {512, 512}, {2048, 512}, {512, 2048},
                           {37000, 512}, {7, 13}, {33, 70}, {1, 1}};
  const int threads = omp_get_max_threads();
  uint64_t seed = 9100;
  for (const Shape2& s : shapes) {
    Tensor w = test::random({s.n, s.k}, DType::f32, ++seed);
    Tensor bias = test::random({s.n}, DType::f32, ++seed);
    Tensor row = test::random({1, s.k}, DType::f32, ++seed);
    const std::vector<float> want = row_product(row, w, bias, 1, 0, ++seed);
    // Against float64: the products' sum, within what K float additions may lose.
    const float* x = row.data_as<float>();
    for (int64_t j = 0; j < s.n; j += std::max<int64_t>(1, s.n / 64)) {
      double exact = bias.data_as<float>()[j], size = std::fabs(exact);
      for (int64_t p = 0; p < s.k; ++p) {
        const double term = static_cast<double>(x[p]) * w.data_as<float>()[j * s.k + p];
        exact += term;
        size += std::fabs(term);
      }
      INFO("n " << s.n << ", k " << s.k << ", column " << j);
      CHECK(std::fabs(want[static_cast<size_t>(j)] - exact) <= 1e-6 * static_cast<double>(s.k) * size + 1e-30);
    }
    std::vector<int64_t> counts = {2, 3, 5, 12, 13, 38, 64, 65};
    if (s.n * s.k > 2048 * 512) counts = {2, 13, 65};  // the output layer: few, it is large
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

TEST_CASE("row-invariant GEMM: the AVX-512, AVX2 and portable paths give the same bits", "[invariance]") {
  using ops::cpu::RowGemmPath;
  const RowGemmPath have = ops::cpu::gemm_row_invariant_path();
  if (have == RowGemmPath::portable) WARN("this CPU has no AVX2 and FMA: only the portable path runs");
  if (have != RowGemmPath::avx512) WARN("this CPU has no AVX-512: its path is not checked here");
  uint64_t seed = 9300;
  // n: blocks of one panel, of two (the AVX-512 tile's), of two whose
  // second is short (50 = 32 + 18: 16 and 2); m: tiles of 6 and 12 and tails.
  for (const auto& [m, n, k] : {std::array<int64_t, 3>{1, 1, 1}, {5, 7, 13}, {64, 96, 64}, {13, 33, 517},
                                {3, 4000, 128}, {25, 40, 9}, {30, 50, 31}}) {
    // The epilogue's every branch: alpha 1 and beta 0 (the decoder's
    // products) and not, with and without a bias, with and without ReLU.
    for (const bool relu : {false, true})
      for (const auto& [alpha, beta, with_bias] : {std::tuple{0.75f, 0.0f, true}, {0.75f, 1.0f, true},
                                                   {1.0f, 0.0f, true}, {1.0f, 0.0f, false}, {1.0f, 1.0f, false}}) {
        Tensor a = test::random({m, k}, DType::f32, ++seed), w = test::random({n, k}, DType::f32, ++seed);
        Tensor bias = test::random({n}, DType::f32, ++seed), c0 = test::random({m, n}, DType::f32, ++seed);
        ops::cpu::GemmShape s;
        s.m = m, s.n = n, s.k = k, s.lda = k, s.ldb = k, s.ldc = n;
        ops::GemmOptions o;
        o.trans_b = true;
        o.row_invariant = true;
        o.relu = relu;
        o.beta = beta;
        o.alpha = alpha;
        const auto run = [&](RowGemmPath path) {
          Tensor out({m, n}, DType::f32);
          std::memcpy(out.data_as<float>(), c0.data_as<float>(), c0.view().bytes());
          ops::cpu::gemm_row_invariant<float>(s, a.data_as<float>(), w.data_as<float>(), out.data_as<float>(),
                                              with_bias ? bias.data_as<float>() : nullptr, o, path);
          return out;
        };
        const Tensor portable = run(RowGemmPath::portable);
        INFO(m << " x " << n << " x " << k << (relu ? ", relu" : "") << ", alpha " << alpha << ", beta " << beta
               << (with_bias ? ", bias" : ""));
        // W's panels laid out beforehand (GemmOptions::packed_b): the same
        // bits on every path, whole or as rows 32.. of a taller matrix.
        std::vector<float> panels(static_cast<size_t>(ops::panels_floats(n, k)));
        ops::pack_panels(w, panels.data());
        Tensor tall = test::random({n + 2 * ops::kPanelRows, k}, DType::f32, ++seed);
        std::memcpy(tall.data_as<float>() + 2 * ops::kPanelRows * k, w.data_as<float>(), w.view().bytes());
        std::vector<float> tall_panels(static_cast<size_t>(ops::panels_floats(n + 2 * ops::kPanelRows, k)));
        ops::pack_panels(tall, tall_panels.data());
        for (const RowGemmPath path : {RowGemmPath::portable, RowGemmPath::avx2, RowGemmPath::avx512}) {
          if (static_cast<int>(path) > static_cast<int>(have)) continue;
          INFO(ops::cpu::row_gemm_path_name(path));
          const Tensor simd = run(path);
          CHECK(std::memcmp(simd.data_as<float>(), portable.data_as<float>(), simd.view().bytes()) == 0);
          for (const float* ready : {panels.data(), tall_panels.data() + 2 * ops::kPanelRows * k}) {
            o.packed_b = ready;
            const Tensor packed = run(path);
            o.packed_b = nullptr;
            INFO((ready == panels.data() ? "packed" : "packed, rows 32.. of a taller matrix"));
            CHECK(std::memcmp(packed.data_as<float>(), portable.data_as<float>(), packed.view().bytes()) == 0);
          }
        }
      }
  }
}

TEST_CASE("decoding gives the same n-best lists and scores at batch sizes 1, 7 and 64", "[invariance]") {
  // A random tiny model through a checkpoint, as tfm-decode loads it; in
  // fp32 and with int8 weights (--precision int8), whose sums are integers.
  const test::TempDir dir;
  {
    ModelLimits limits;
    limits.max_tokens = 64;
    limits.max_len = 16;
    Transformer model(ModelConfig::preset("tiny"), limits, Device::cpu());
    model.init(31);
    save_model(dir.file("tiny.bin"), model);
  }
  // fp32 and int8, each also with the weights packed for the CPU's decoder
  // (the same bits: checked against the unpacked batch-1 run).
  struct Weights {
    bool int8, packed;
  };
  std::vector<std::vector<Hypothesis>> unpacked_one;
  for (const Weights weights : {Weights{false, false}, Weights{false, true}, Weights{true, false}, Weights{true, true}}) {
    const bool int8 = weights.int8;
    INFO((int8 ? "int8" : "fp32") << (weights.packed ? ", packed weights" : ""));
    auto model = ModelFile(dir.file("tiny.bin")).load_weights(Device::cpu());
    if (int8) model->quantize_int8();
    if (weights.packed) {
      model->pack_weights();
      REQUIRE((int8 ? model->int8_weights()->packed_bytes() > 0 : model->packed_weights() != nullptr));
    }
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
    o.attention_layer = 0;  // the kept cross-attention must not depend on the batch either
    DecoderLimits dl;
    dl.attention_layer = 0;
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
    if (!weights.packed) unpacked_one = one;
    if (weights.packed) {
      REQUIRE(one.size() == unpacked_one.size());
      for (size_t s = 0; s < one.size(); ++s) {
        INFO("sentence " << s << " against the unpacked weights");
        REQUIRE(one[s].size() == unpacked_one[s].size());
        for (size_t i = 0; i < one[s].size(); ++i) {
          CHECK(one[s][i].tokens == unpacked_one[s][i].tokens);
          CHECK(one[s][i].token_log_probs == unpacked_one[s][i].token_log_probs);
          CHECK(one[s][i].score == unpacked_one[s][i].score);
        }
      }
    }
    int64_t hypotheses = 0;
    // At 64 sentences (256 rows) the decoder splits each step's rows
    // between its threads (IncrementalDecoder::queue_step): two, and three
    // for uneven shares.
    struct Run {
      size_t size;
      uint64_t shuffle;
      int threads;
    };
    const int threads = omp_get_max_threads();
    for (const Run& run : {Run{7, 5, threads}, Run{64, 0, 2}, Run{64, 11, 3}}) {
      const auto& [size, shuffle, run_threads] = run;
      omp_set_num_threads(run_threads);
      const auto got = decode_all(size, shuffle);
      omp_set_num_threads(threads);
      for (size_t s = 0; s < requests.size(); ++s) {
        INFO("batch size " << size << ", sentence " << s);
        REQUIRE(got[s].size() == one[s].size());
        for (size_t i = 0; i < one[s].size(); ++i) {
          CHECK(got[s][i].tokens == one[s][i].tokens);
          CHECK(got[s][i].token_log_probs == one[s][i].token_log_probs);  // bit for bit
          CHECK(got[s][i].score == one[s][i].score);
          CHECK(got[s][i].attention == one[s][i].attention);
          ++hypotheses;
        }
      }
    }
    CHECK(hypotheses == 3 * 64 * 4);
  }
}
