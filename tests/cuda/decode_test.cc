// CUDA decoding against the CPU: attention over gathered keys (f32, bf16,
// f16; empty lists, shared lists, the weights; the same row alone gives the
// same bits), the top-k log-softmax (ids exact, values to f32 accuracy),
// the incremental decoder with reordered and dropped rows, and a beam search.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "libcore/decode/search.h"
#include "tests/support.h"

using namespace tfm;

TEST_CASE("cuda attention_gather matches the cpu", "[decode]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 13000;
  struct Case { int64_t n, h, k, e, pool, list; std::vector<int> lengths, groups; };
  const Case cases[] = {{3, 2, 5, 3, 7, 4, {4, 1, 0}, {0, 1, 2}},
                        {6, 3, 8, 8, 11, 9, {9, 5}, {1, 1, 0, 0, 1, 0}},
                        {64, 8, 64, 64, 500, 120, {120, 17, 1, 64}, {}},
                        // Heads of 32 and 128: the packed kernel's other sizes.
                        {5, 4, 32, 32, 90, 70, {70, 3, 33}, {0, 1, 2, 2, 0}},
                        {4, 2, 128, 128, 300, 200, {200, 150}, {0, 1, 0, 1}},
                        {4, 16, 64, 64, 3000, 2900, {2900, 1}, {0, 1, 0, 1}},
                        // 4 warps x 4,000 scores: 64 KB of shared memory, past the
                        // 48 KB a launch gets without opting in.
                        {3, 4, 64, 32, 5000, 4000, {4000, 2500}, {0, 1, 1}}};
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (Case c : cases) {
      if (c.groups.empty())
        for (int64_t r = 0; r < c.n; ++r) c.groups.push_back(static_cast<int>(r % 4));
      const int64_t G = static_cast<int64_t>(c.lengths.size());
      Tensor q = test::random({c.n, c.h, c.k}, dtype, ++seed);
      Tensor keys = test::random({c.pool, c.h, c.k}, dtype, ++seed);
      Tensor values = test::random({c.pool, c.h, c.e}, dtype, ++seed);
      const std::vector<int> index = test::random_ints(G * c.list, c.pool, ++seed);
      Tensor idx = test::from_f64(std::vector<double>(index.begin(), index.end()), {G, c.list}, DType::i32);
      Tensor lengths = test::i32(c.lengths), groups = test::i32(c.groups);
      // Device copies live until the stream is done with them.
      const Tensor g_q = test::to_device(q, gpu), g_keys = test::to_device(keys, gpu),
                   g_values = test::to_device(values, gpu), g_idx = test::to_device(idx, gpu),
                   g_lengths = test::to_device(lengths, gpu), g_groups = test::to_device(groups, gpu),
                   g_last_group = test::to_device(test::i32({c.groups.back()}), gpu);
      Tensor g_out({c.n, c.h, c.e}, dtype, gpu), g_probs({c.n, c.h, c.list}, DType::f32, gpu);
      ops::attention_gather(g_q, g_keys, g_values, g_idx, g_lengths, g_groups, 0.125f, g_out, g_probs, cuda);
      Tensor out64({c.n, c.h, c.e}, DType::f64), probs64({c.n, c.h, c.list}, DType::f64);
      ops::attention_gather(test::cast(q, DType::f64), test::cast(keys, DType::f64),
                            test::cast(values, DType::f64), idx, lengths, groups, 0.125f, out64,
                            probs64, cpu);
      // The last row alone: the same bits as inside the batch.
      Tensor g_alone({1, c.h, c.e}, dtype, gpu);
      const TensorView q_last(static_cast<char*>(g_q.view().data()) + (c.n - 1) * c.h * c.k * dtype_size(dtype),
                              dtype, {1, c.h, c.k}, gpu);
      ops::attention_gather(q_last, g_keys, g_values, g_idx, g_lengths, g_last_group, 0.125f, g_alone, {}, cuda);
      cuda.synchronize();
      INFO(dtype_name(dtype) << ", N " << c.n << ", L " << c.list);
      test::require_close({{"out", g_out, test::to_f64(out64), test::tolerance_for(dtype, c.k + c.list)},
                           {"probs", g_probs, test::to_f64(probs64), test::tolerance_for(DType::f32, c.k)}});
      const std::vector<double> all = test::to_f64(g_out), one = test::to_f64(g_alone);
      CHECK(std::equal(one.begin(), one.end(), all.end() - c.h * c.e));
    }
}

TEST_CASE("cuda attention_gather reads entries outside the pool as empty keys", "[decode]") {
  // extend_history writes -1 for rows whose parent is gone. The result must
  // be attention over the valid entries alone (the cpu on the compacted
  // lists), with probabilities 0 at the invalid places; in the general
  // kernel (heads of 5 and 3) and the packed one (64).
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 13050;
  const int64_t n = 3, h = 2, pool = 40, list = 12;
  const std::vector<int> lengths = {12, 7, 0};
  for (DType dtype : {DType::f32, DType::bf16})
    for (auto [k, e] : {std::pair<int64_t, int64_t>{5, 3}, {64, 64}}) {
      std::vector<int> index = test::random_ints(n * list, pool, ++seed);
      for (size_t i = 0; i < index.size(); i += 3) index[i] = i % 2 ? -1 : int(pool + i);
      // The same lists without the invalid entries, for the cpu.
      std::vector<int> compact(n * list, 0), compact_lengths(n, 0);
      for (int64_t g = 0; g < n; ++g)
        for (int64_t j = 0; j < lengths[g]; ++j)
          if (const int p = index[g * list + j]; p >= 0 && p < pool)
            compact[g * list + compact_lengths[g]++] = p;
      const std::vector<int> groups = {0, 1, 2};
      Tensor q = test::random({n, h, k}, dtype, ++seed), keys = test::random({pool, h, k}, dtype, ++seed),
             values = test::random({pool, h, e}, dtype, ++seed);
      auto ints = [](const std::vector<int>& v, Shape shape) {
        return test::from_f64(std::vector<double>(v.begin(), v.end()), shape, DType::i32);
      };
      const Tensor g_q = test::to_device(q, gpu), g_keys = test::to_device(keys, gpu),
                   g_values = test::to_device(values, gpu), g_idx = test::to_device(ints(index, {n, list}), gpu),
                   g_lengths = test::to_device(test::i32(lengths), gpu),
                   g_groups = test::to_device(test::i32(groups), gpu);
      Tensor g_out({n, h, e}, dtype, gpu), g_probs({n, h, list}, DType::f32, gpu);
      ops::attention_gather(g_q, g_keys, g_values, g_idx, g_lengths, g_groups, 0.25f, g_out, g_probs, cuda);
      Tensor out64({n, h, e}, DType::f64), probs64({n, h, list}, DType::f64);
      ops::attention_gather(test::cast(q, DType::f64), test::cast(keys, DType::f64),
                            test::cast(values, DType::f64), ints(compact, {n, list}),
                            test::i32(compact_lengths), test::i32(groups), 0.25f, out64, probs64, cpu);
      cuda.synchronize();
      // The compacted probabilities back at their entries' places.
      const std::vector<double> packed = test::to_f64(probs64);
      std::vector<double> expected(packed.size(), 0.0);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t hh = 0; hh < h; ++hh) {
          int64_t c = 0;
          for (int64_t j = 0; j < lengths[r]; ++j)
            if (const int p = index[r * list + j]; p >= 0 && p < pool)
              expected[(r * h + hh) * list + j] = packed[(r * h + hh) * list + c++];
        }
      INFO(dtype_name(dtype) << ", K " << k << ", E " << e);
      test::require_close({{"out", g_out, test::to_f64(out64), test::tolerance_for(dtype, k + list)},
                           {"probs", g_probs, expected, test::tolerance_for(DType::f32, k)}});
      const std::vector<double> last = test::to_f64(g_out);
      CHECK(std::all_of(last.end() - h * e, last.end(), [](double x) { return x == 0.0; }));  // empty list
    }
}

TEST_CASE("cuda log_softmax_topk matches the cpu", "[decode]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 13100;
  struct Case { int64_t n, v, k; };
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (const Case& c : {Case{1, 1, 1}, Case{3, 10, 10}, Case{5, 37, 8}, Case{7, 37000, 8}, Case{2, 300, 100}}) {
      Tensor logits = test::random({c.n, c.v}, dtype, ++seed, -8.0f, 8.0f);
      const Tensor g_logits = test::to_device(logits, gpu);
      Tensor g_values({c.n, c.k}, DType::f32, gpu), g_ids({c.n, c.k}, DType::i32, gpu), g_lse({c.n}, DType::f32, gpu);
      ops::log_softmax_topk(g_logits, g_values, g_ids, g_lse, cuda);
      Tensor values({c.n, c.k}, DType::f64), ids({c.n, c.k}, DType::i32), lse({c.n}, DType::f64);
      ops::log_softmax_topk(test::cast(logits, DType::f64), values, ids, lse, cpu);
      cuda.synchronize();
      INFO(dtype_name(dtype) << ", N " << c.n << ", V " << c.v << ", k " << c.k);
      CHECK(test::to_f64(g_ids) == test::to_f64(ids));  // the same logits, so the same order
      test::require_close({{"values", g_values, test::to_f64(values), test::tolerance_for(DType::f32, c.v)},
                           {"lse", g_lse, test::to_f64(lse), test::tolerance_for(DType::f32, c.v)}});
    }
}

TEST_CASE("cuda log_softmax_topk breaks ties by the smaller id, as the cpu does", "[decode]") {
  // Logits of 7 distinct values over thousands of ids: the top k are all
  // ties, and both kernels (one pass for k <= 16, rounds beyond) must order
  // them by id across threads and warps.
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 13200;
  for (int64_t k : {1, 4, 8, 12, 16, 40})
    for (int64_t v : {40, 1000, 37000}) {
      std::vector<double> x = test::to_f64(test::random({3, v}, DType::f64, ++seed, -3.0f, 4.0f));
      for (double& e : x) e = std::floor(e);
      const Tensor logits = test::from_f64(x, {3, v}, DType::f32);
      const Tensor g_logits = test::to_device(logits, gpu);
      Tensor g_values({3, k}, DType::f32, gpu), g_ids({3, k}, DType::i32, gpu), g_lse({3}, DType::f32, gpu);
      ops::log_softmax_topk(g_logits, g_values, g_ids, g_lse, cuda);
      Tensor values({3, k}, DType::f64), ids({3, k}, DType::i32), lse({3}, DType::f64);
      ops::log_softmax_topk(test::cast(logits, DType::f64), values, ids, lse, cpu);
      cuda.synchronize();
      INFO("V " << v << ", k " << k);
      CHECK(test::to_f64(g_ids) == test::to_f64(ids));
      test::require_close({{"values", g_values, test::to_f64(values), test::tolerance_for(DType::f32, v)}});
    }
}

TEST_CASE("cuda log_softmax_topk keeps -inf logits, by id, where fewer than k are finite, as the cpu does",
          "[decode]") {
  // A shortlist or a constraint masks logits with -inf: rows of V = 40 and
  // 1,000 (16-byte packs in every dtype) and 37 (single elements) with
  // three finite logits, the first of them late in the row.
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (int64_t v : {37, 40, 1000}) {
      std::vector<double> x(static_cast<size_t>(2 * v), -INFINITY);
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t j : {v - 1, v / 2, v / 3}) x[static_cast<size_t>(r * v + j)] = 0.5 * static_cast<double>(j % 7 + r);
      const Tensor logits = test::from_f64(x, {2, v}, dtype);
      const int64_t k = 8;
      Tensor g_values({2, k}, DType::f32, gpu), g_ids({2, k}, DType::i32, gpu), g_lse({2}, DType::f32, gpu);
      ops::log_softmax_topk(test::to_device(logits, gpu), g_values, g_ids, g_lse, cuda);
      Tensor values({2, k}, DType::f64), ids({2, k}, DType::i32), lse({2}, DType::f64);
      ops::log_softmax_topk(test::cast(logits, DType::f64), values, ids, lse, cpu);
      cuda.synchronize();
      INFO(dtype_name(dtype) << ", V " << v);
      CHECK(test::to_f64(g_ids) == test::to_f64(ids));  // three finite ones, then -inf ones by smallest id
      const std::vector<double> got = test::to_f64(g_values), want = test::to_f64(values);
      for (size_t i = 0; i < want.size(); ++i) {
        INFO("entry " << i);
        if (std::isinf(want[i])) CHECK(got[i] == want[i]);
        else CHECK(std::abs(got[i] - want[i]) <= 1e-5);
      }
      test::require_close({{"lse", g_lse, test::to_f64(lse), test::tolerance_for(DType::f32, v)}});
    }
}

namespace {

// The decoder's steps and a beam search of model c on both devices.
void check_decoder_matches_cpu(const ModelConfig& c) {
  ModelWeights cpu(c, Device::cpu()), gpu(c, Device::cuda(0));
  cpu.init(8);
  gpu.init(8);
  const std::vector<std::vector<int32_t>> sources = {{5, 6, 7}, {8, 9, 10, 11, 12}};
  DecoderLimits dl{.sentences = 2, .src_tokens = 10, .src_len = 5, .rows = 4, .steps = 8};
  IncrementalDecoder dc(cpu, dl), dg(gpu, dl);
  dc.start(sources, 4, 8);
  dg.start(sources, 4, 8);
  // Rows {sentence, parent, token}: duplicated, reordered, dropped.
  const std::vector<std::vector<IncrementalDecoder::Row>> steps = {
      {{0, 0, kBosId}, {1, 0, kBosId}},
      {{0, 0, 20}, {0, 0, 21}, {1, 1, 40}, {1, 1, 41}},
      {{1, 3, 42}, {0, 1, 22}, {0, 0, 23}},
      {{0, 2, 24}, {1, 0, 43}}};
  for (size_t t = 0; t < steps.size(); ++t) {
    dc.step(steps[t]);
    dg.step(steps[t]);
    const Tensor a = dc.log_probs(), b = dg.log_probs();
    INFO("step " << t);
    test::require_close({{"log-probs", b, test::to_f64(a), {1e-4, 1e-5}}});
  }

  BeamSearchOptions o;
  o.n_best = 2;
  std::vector<SearchRequest> batch;
  for (const auto& s : sources) batch.push_back({s, static_cast<int64_t>(s.size()) + 3, 0});
  // Beam 4 over 2 sentences: 8 rows; the longer allows 5 + 3 tokens after the first.
  dl.top_k = 8;
  dl.rows = 8;
  dl.steps = 9;
  IncrementalDecoder sc(cpu, dl), sg(gpu, dl);
  const auto want = beam_search(sc, batch, o), got = beam_search(sg, batch, o);
  for (size_t s = 0; s < batch.size(); ++s) {
    REQUIRE(got[s].size() == want[s].size());
    for (size_t i = 0; i < got[s].size(); ++i)
      CHECK(got[s][i].score == Approx(want[s][i].score).margin(1e-4));
  }
}

}  // namespace

TEST_CASE("the incremental decoder and beam search on cuda match the cpu", "[decode]") {
  // Plain, then the variants of Marian's and of fairseq's models (config.h).
  for (const char* variants : {"", "activation = silu\noutput_bias = true\nposition_layout = halves\nencoder_layers = 3",
                               "activation = gelu\ntie_output = false\nscale_embeddings = false\n"
                               "position_layout = fairseq\nposition_offset = 2\ndecoder_layers = 1"}) {
    INFO("variants: " << variants);
    ModelConfig c = ModelConfig::preset("tiny");
    c.parse("vocab_size = 97\nd_model = 48\nd_ff = 80\nheads = 3\nd_k = 20\nd_v = 12");  // row B's shapes
    c.parse(variants);
    check_decoder_matches_cpu(c);
  }
}

// A step's kernels captured and launched as one CUDA graph give the bits
// of the same kernels launched one by one; steps of the same rows update
// the graph in place, another row count builds it anew.
TEST_CASE("decoder steps as cuda graphs give the bits of plain launches", "[decode]") {
  ModelConfig c = ModelConfig::preset("tiny");
  c.parse("vocab_size = 97\nd_model = 48\nd_ff = 80\nheads = 3\nd_k = 16\nd_v = 16");
  for (DType dtype : {DType::f32, DType::bf16}) {
    ModelWeights gpu(c, Device::cuda(0), dtype);
    gpu.init(8);
    gpu.refresh_weights();
    const std::vector<std::vector<int32_t>> sources = {{5, 6, 7}, {8, 9, 10, 11, 12}};
    DecoderLimits plain{.sentences = 2, .src_tokens = 10, .src_len = 5, .rows = 4, .steps = 8};
    plain.cuda_graph = false;
    DecoderLimits graphed = plain;
    graphed.cuda_graph = true;
    IncrementalDecoder a(gpu, plain), b(gpu, graphed);
    a.start(sources, 4, 8);
    b.start(sources, 4, 8);
    const std::vector<std::vector<IncrementalDecoder::Row>> steps = {
        {{0, 0, kBosId}, {1, 0, kBosId}},
        {{0, 0, 20}, {0, 0, 21}, {1, 1, 40}, {1, 1, 41}},
        {{0, 1, 22}, {0, 0, 23}, {1, 3, 42}, {1, 2, 43}},
        {{0, 0, 24}, {0, 1, 25}, {1, 2, 44}, {1, 3, 45}},  // parents: rows of the same sentence
        {{1, 3, 46}, {0, 1, 26}}};
    for (size_t t = 0; t < steps.size(); ++t) {
      a.step(steps[t]);
      b.step(steps[t]);
      const Tensor x = a.log_probs(), y = b.log_probs();
      INFO(dtype_name(dtype) << " step " << t);
      REQUIRE(std::memcmp(x.view().data(), y.view().data(), x.view().bytes()) == 0);
    }
    CHECK_FALSE(a.graph().enabled());
    REQUIRE(b.graph().enabled());  // every step ran as a graph
    CHECK(b.graph().launches() == 5);
    // Rows 2, 4, 4, 4, 2 all run as the batch's 4 (graph_rows); t's parity
    // 0, 1, 0, 1, 0: two graphs, each launched again.
    CHECK(b.graph().instantiations() == 2);

    // Another batch on the same decoders, with the top k on the way: the
    // graphs hold (every table is planned at the limits' size), the bits
    // are the plain launches'.
    a.start({{7, 7, 8, 9, 10}, {11}}, 4, 8);
    b.start({{7, 7, 8, 9, 10}, {11}}, 4, 8);
    for (size_t t = 0; t < steps.size(); ++t) {
      a.step(steps[t]);
      b.step(steps[t]);
      std::vector<double> want_lp, got_lp;
      std::vector<int32_t> want_ids, got_ids;
      a.top_k(6, want_lp, want_ids);
      b.top_k(6, got_lp, got_ids);
      INFO(dtype_name(dtype) << " step " << t << ", second batch");
      CHECK(got_ids == want_ids);
      REQUIRE(got_lp.size() == want_lp.size());
      CHECK(std::memcmp(got_lp.data(), want_lp.data(), got_lp.size() * sizeof(double)) == 0);
      const Tensor x = a.log_probs(), y = b.log_probs();
      REQUIRE(std::memcmp(x.view().data(), y.view().data(), x.view().bytes()) == 0);
    }
    CHECK(b.graph().launches() == 10);
    CHECK(b.graph().instantiations() == 2);
  }
}

// Admissions on a GPU run the encoder at a padded shape (encoder_shape in
// incremental.cc: sentences and tokens rounded up within the plan), one
// CUDA graph a shape: each step's log-probabilities are the CPU's, and
// with graphs on or off the same bits.
TEST_CASE("the encoder on cuda runs admissions padded, one graph a shape, with the cpu's results", "[decode]") {
  ModelConfig c = ModelConfig::preset("tiny");
  c.parse("vocab_size = 97\nd_model = 48\nd_ff = 80\nheads = 3\nd_k = 16\nd_v = 16");
  ModelWeights cpu(c, Device::cpu()), gpu(c, Device::cuda(0));
  cpu.init(8);
  gpu.init(8);
  DecoderLimits plain{.sentences = 6, .src_tokens = 40, .src_len = 10, .rows = 6, .steps = 6};
  plain.cuda_graph = false;
  DecoderLimits graphed = plain;
  graphed.cuda_graph = true;
  IncrementalDecoder dc(cpu, plain), da(gpu, plain), db(gpu, graphed);
  const std::vector<IncrementalDecoder*> all = {&dc, &da, &db};
  const auto step = [&](const std::vector<IncrementalDecoder::Row>& rows, const char* what) {
    for (IncrementalDecoder* d : all) d->step(rows);
    const Tensor want = dc.log_probs(), plain_bits = da.log_probs(), graph_bits = db.log_probs();
    INFO(what);
    test::require_close({{"log-probs", plain_bits, test::to_f64(want), {1e-4, 1e-5}}});
    REQUIRE(std::memcmp(plain_bits.view().data(), graph_bits.view().data(), plain_bits.view().bytes()) == 0);
  };
  // Admissions (B, S) -> the shape run: (2, 3), (1, 5) and (2, 3) -> (5, 8)
  // (8 x 6 sentences is over the 40 tokens planned); (1, 9) -> (4, 10).
  for (IncrementalDecoder* d : all) d->start({{5, 6, 7}, {8, 9}}, 6, 6);
  step({{0, 0, kBosId}, {1, 0, kBosId}}, "slots 0 and 1 admitted");
  for (IncrementalDecoder* d : all) REQUIRE(d->admit({{10, 11, 12, 13, 14}}) == std::vector<int32_t>{2});
  step({{0, 0, 20}, {1, 1, 21}, {2, 0, kBosId}}, "slot 2 joined");
  for (IncrementalDecoder* d : all) {
    d->release(0);
    REQUIRE(d->admit({{15, 16}, {17, 18, 19}}) == std::vector<int32_t>{0, 3});
  }
  step({{1, 1, 22}, {2, 2, 23}, {0, 0, kBosId}, {3, 0, kBosId}}, "slot 0 again and slot 3 joined");
  for (IncrementalDecoder* d : all) REQUIRE(d->admit({{20, 21, 22, 23, 24, 25, 26, 27, 28}}) == std::vector<int32_t>{4});
  step({{1, 0, 24}, {2, 1, 25}, {0, 2, 26}, {3, 3, 27}, {4, 0, kBosId}}, "slot 4 joined");
  CHECK_FALSE(da.encoder_graph().enabled());
  REQUIRE(db.encoder_graph().enabled());
  CHECK(db.encoder_graph().launches() == 4);
  CHECK(db.encoder_graph().instantiations() == 2);
}

TEST_CASE("cuda extend_history matches the cpu", "[decode]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 13300;
  const int64_t R = 300, T = 70;
  // Rows at one position, and (continuous batching) at mixed ones, 0 among them.
  for (int64_t t : {0, 1, 2, 37, 69, -1}) {
    const int64_t n = t == 0 ? 7 : 250;
    const std::vector<int> values = test::random_ints(R * T, 1 << 20, ++seed);
    const std::vector<int> parents = test::random_ints(n, R, ++seed);
    std::vector<int> positions = t >= 0 ? std::vector<int>(static_cast<size_t>(n), static_cast<int>(t))
                                        : test::random_ints(n, static_cast<int>(T), ++seed);
    std::vector<int> pool_rows(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) pool_rows[static_cast<size_t>(r)] = static_cast<int>(R * T + 3 * r);
    Tensor prev = test::from_f64(std::vector<double>(values.begin(), values.end()), {R, T}, DType::i32);
    const Tensor par = test::i32(parents), pos = test::i32(positions), slots = test::i32(pool_rows);
    Tensor next = Tensor::zeros({R, T}, DType::i32), lengths({n}, DType::i32);
    ops::extend_history(prev, par, pos, slots, next, lengths, cpu);
    const Tensor g_prev = test::to_device(prev, gpu), g_par = test::to_device(par, gpu),
                 g_pos = test::to_device(pos, gpu), g_slots = test::to_device(slots, gpu);
    const Tensor g_next = test::to_device(Tensor::zeros({R, T}, DType::i32), gpu);
    Tensor g_lengths({n}, DType::i32, gpu);
    ops::extend_history(g_prev, g_par, g_pos, g_slots, g_next, g_lengths, cuda);
    cuda.synchronize();
    INFO("t " << t << ", N " << n);
    CHECK(test::to_f64(g_next) == test::to_f64(next));
    CHECK(test::to_f64(g_lengths) == test::to_f64(lengths));
  }
  // What the cpu rejects, CUDA makes harmless: a position past the lists
  // writes nothing; a parent outside [0, R) an empty list (-1s).
  const Tensor g_prev = test::to_device(Tensor::zeros({R, T}, DType::i32), gpu);
  const Tensor g_next = test::to_device(test::from_f64(std::vector<double>(R * T, 7.0), {R, T}, DType::i32), gpu);
  Tensor g_lengths = test::to_device(test::i32({5, 5}), gpu);
  const Tensor g_slots = test::to_device(test::i32({40, 41}), gpu);
  ops::extend_history(g_prev, test::to_device(test::i32({0, 1}), gpu), test::to_device(test::i32({static_cast<int>(T), -1}), gpu),
                      g_slots, g_next, g_lengths, cuda);
  cuda.synchronize();
  CHECK(test::to_f64(g_lengths) == std::vector<double>{5, 5});
  CHECK(test::to_f64(g_next) == std::vector<double>(R * T, 7.0));
  ops::extend_history(g_prev, test::to_device(test::i32({-1, static_cast<int>(R)}), gpu),
                      test::to_device(test::i32({2, 2}), gpu), g_slots, g_next, g_lengths, cuda);
  const std::vector<double> lists = test::to_f64(g_next);
  CHECK(std::vector<double>(lists.begin(), lists.begin() + 3) == std::vector<double>{-1, -1, 40});
  CHECK(std::vector<double>(lists.begin() + T, lists.begin() + T + 3) == std::vector<double>{-1, -1, 41});
  CHECK(test::to_f64(g_lengths) == std::vector<double>{3, 3});
}

TEST_CASE("cuda scatter_columns and position_add_at match the cpu", "[decode]") {
  const Device gpu = Device::cuda(0);
  Stream cuda(gpu), cpu(Device::cpu());
  uint64_t seed = 13400;
  // Columns of a (q | k | v) row block into pool rows: 16-byte units (64
  // bf16 at column 64), 2-byte ones (odd widths), and f32.
  struct Case { DType dtype; int64_t rows, cols, col, width, pool; };
  for (const Case& c : {Case{DType::bf16, 40, 192, 64, 64, 300}, Case{DType::f16, 9, 15, 3, 5, 20},
                        Case{DType::f32, 17, 12, 4, 8, 50}}) {
    const Tensor x = test::random({c.rows, c.cols}, c.dtype, ++seed);
    std::vector<int> index(static_cast<size_t>(c.rows));
    for (int64_t r = 0; r < c.rows; ++r) index[static_cast<size_t>(r)] = static_cast<int>((r * 7 + 3) % c.pool);
    const Tensor y0 = test::random({c.pool, c.width}, c.dtype, ++seed);
    Tensor y = test::cast(y0, c.dtype);
    ops::scatter_columns(x, c.col, test::i32(index), y, cpu);
    const Tensor g_x = test::to_device(x, gpu), g_index = test::to_device(test::i32(index), gpu);
    Tensor g_y = test::to_device(y0, gpu);
    ops::scatter_columns(g_x, c.col, g_index, g_y, cuda);
    // An index outside the pool: that row is skipped.
    index[0] = static_cast<int>(c.pool);
    ops::scatter_columns(g_x, c.col, test::to_device(test::i32(index), gpu), g_y, cuda);
    cuda.synchronize();
    INFO(dtype_name(c.dtype) << " " << c.rows << " x " << c.width);
    CHECK(test::to_f64(g_y) == test::to_f64(y));
  }
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Tensor x = test::random({6, 1, 32}, dtype, ++seed), table = test::random({20, 32}, DType::f32, ++seed);
    Tensor want = test::cast(x, DType::f64);  // the cpu adds in f64 (it has no bf16)
    ops::position_add(want, test::cast(table, DType::f64), 13, cpu);
    Tensor g_x = test::to_device(x, gpu), g_far = test::to_device(x, gpu);
    const Tensor g_table = test::to_device(table, gpu);
    ops::position_add_at(g_x, g_table, test::to_device(test::i32({13}), gpu), cuda);
    ops::position_add_at(g_far, g_table, test::to_device(test::i32({20}), gpu), cuda);  // past the table: nothing
    // One position a row (continuous batching), one of them past the table.
    const std::vector<int> each = {0, 5, 19, 13, 20, 7};
    Tensor g_each = test::to_device(x, gpu), want_each = test::cast(x, DType::f64);
    ops::position_add_at(g_each, g_table, test::to_device(test::i32(each), gpu), cuda);
    std::vector<double> rows = test::to_f64(want_each);
    const std::vector<double> tab = test::to_f64(table);
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t d = 0; d < 32 && each[static_cast<size_t>(r)] < 20; ++d)
        rows[static_cast<size_t>(r * 32 + d)] += tab[static_cast<size_t>(each[static_cast<size_t>(r)] * 32 + d)];
    cuda.synchronize();
    INFO(dtype_name(dtype));
    test::require_close({{"x", g_x, test::to_f64(want), test::tolerance_for(dtype)}});
    CHECK(test::to_f64(g_far) == test::to_f64(x));
    test::require_close({{"x, a position a row", g_each, rows, test::tolerance_for(dtype)}});
  }
}
