// The model at the sizes the other CUDA tests keep small, against the CPU:
// the big preset's widths (D 1024, 16 heads, F 4096) in beam search;
// sentences of 300 tokens (attention tiles, masks and position tables past
// 256) in a training step; a vocabulary of 65,536 (the loss's chunks, the
// top k over V = 64k) in a training step and in decoding. All [large]:
// the sizes are the point, and compute-sanitizer (--small) would take
// minutes over them.
//
// Random weights give near-ties among tokens, which any rounding may
// order either way: decoding is compared where it cannot depend on them
// (log-probabilities, the k-th best value, an id where no other is within
// the tolerance of its log-probability), and n-best lists by the CPU's own
// log-probability of what the GPU found.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "libcore/decode/search.h"
#include "libcore/model/transformer.h"
#include "libcore/train/optimizer.h"
#include "libcore/viz/attention.h"
#include "tests/support.h"

using namespace tfm;

namespace {

// Sentences of exactly these lengths.
std::vector<std::vector<int32_t>> sentences_of(const std::vector<int64_t>& lengths, int64_t V, uint64_t seed) {
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < lengths.size(); ++i)
    out.push_back(test::random_sentences(1, lengths[i], lengths[i], V, seed + i)[0]);
  return out;
}

// log p(tokens, eos | source) under `model`, decoding one row forced.
double forced_log_prob(const ModelWeights& model, const std::vector<int32_t>& source,
                       const std::vector<int32_t>& tokens) {
  const auto S = static_cast<int64_t>(source.size()), T = static_cast<int64_t>(tokens.size()) + 1;
  IncrementalDecoder dec(model, {.sentences = 1, .src_tokens = S, .src_len = S, .rows = 1, .steps = T});
  dec.start({source}, 1, T);
  const auto start = static_cast<int32_t>(model.config().decoder_start_id);
  const auto eos = static_cast<int32_t>(model.config().eos_id);
  double lp = 0;
  for (int64_t t = 0; t < T; ++t) {
    dec.step({{0, 0, t == 0 ? start : tokens[static_cast<size_t>(t - 1)]}});
    lp += dec.log_prob_of(t + 1 < T ? tokens[static_cast<size_t>(t)] : eos)[0];
  }
  return lp;
}

// The n-best lists of a beam search on each device: the same lists but
// for a near-tie (at most one sentence), and every hypothesis the GPU
// found scored as the CPU's model scores it, within `margin`.
void check_beam_search(const ModelWeights& cpu, const ModelWeights& gpu, const std::vector<SearchRequest>& batch,
                       const BeamSearchOptions& o, double margin) {
  const auto sentences = static_cast<int64_t>(batch.size());
  int64_t src_len = 0;
  for (const SearchRequest& r : batch) src_len = std::max<int64_t>(src_len, static_cast<int64_t>(r.source.size()));
  const DecoderLimits dl{.sentences = sentences, .src_tokens = sentences * src_len, .src_len = src_len,
                         .rows = search_rows(sentences, o), .steps = search_steps(batch),
                         .top_k = std::max<int64_t>(8, 2 * o.beam_size)};
  IncrementalDecoder dc(cpu, dl), dg(gpu, dl);
  const auto want = beam_search(dc, batch, o), got = beam_search(dg, batch, o);
  REQUIRE(want.size() == batch.size());
  REQUIRE(got.size() == batch.size());
  int64_t identical = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    INFO("sentence " << s);
    REQUIRE(got[s].size() == want[s].size());
    bool same = true;
    for (size_t i = 0; i < want[s].size(); ++i) same = same && got[s][i].tokens == want[s][i].tokens;
    identical += same;
    for (const Hypothesis& h : got[s]) {
      const auto w = std::find_if(want[s].begin(), want[s].end(),
                                  [&](const Hypothesis& x) { return x.tokens == h.tokens; });
      const bool found = w != want[s].end();
      const double ref = found ? w->log_prob : forced_log_prob(cpu, batch[s].source, h.tokens);
      INFO("a hypothesis of " << h.tokens.size() << " tokens" << (found ? "" : " the cpu did not find")
                              << ": log-prob cuda " << h.log_prob << ", cpu " << ref);
      CHECK(std::abs(h.log_prob - ref) <= margin);
      CHECK(h.token_log_probs.size() == h.tokens.size() + 1);
    }
  }
  INFO(identical << " of " << sentences << " n-best lists identical");
  CHECK(identical >= sentences - 1);
}

// Of the last step of each decoder: the k best values agree, and each id
// the GPU gives has that value on the CPU; where no other id's CPU
// log-probability is within twice the tolerance, it is the CPU's id.
void check_top_k(IncrementalDecoder& cpu, IncrementalDecoder& gpu, int64_t k) {
  std::vector<double> want_lp, got_lp;
  std::vector<int32_t> want_ids, got_ids;
  cpu.top_k(k, want_lp, want_ids);
  gpu.top_k(k, got_lp, got_ids);
  const std::vector<double> full = test::to_f64(cpu.log_probs());  // (N, V)
  const int64_t V = cpu.vocab_size(), N = static_cast<int64_t>(full.size()) / V;
  REQUIRE(static_cast<int64_t>(got_lp.size()) == N * k);
  REQUIRE(static_cast<int64_t>(got_ids.size()) == N * k);
  REQUIRE(static_cast<int64_t>(want_ids.size()) == N * k);
  int64_t checked_ids = 0;
  for (int64_t r = 0; r < N; ++r)
    for (int64_t i = 0; i < k; ++i) {
      const size_t at = static_cast<size_t>(r * k + i);
      const double w = want_lp[at], g = got_lp[at], tol = 1e-4 + 1e-5 * std::abs(w);
      const int32_t id = got_ids[at];
      INFO("row " << r << ", place " << i << ": cuda id " << id << " (" << g << "), cpu id " << want_ids[at]
                  << " (" << w << ")");
      CHECK(std::abs(g - w) <= tol);
      REQUIRE((id >= 0 && id < V));
      CHECK(std::abs(g - full[static_cast<size_t>(r * V + id)]) <= tol);
      for (int64_t j = 0; j < i; ++j) CHECK(got_ids[static_cast<size_t>(r * k + j)] != id);
      int64_t near = 0;
      for (int64_t v = 0; v < V; ++v) near += std::abs(full[static_cast<size_t>(r * V + v)] - w) <= 2 * tol;
      if (near == 1) {
        CHECK(id == want_ids[at]);
        ++checked_ids;
      }
    }
  CHECK(checked_ids >= N * k / 2);  // near-ties are the exception
}

// Decoder steps over two sentences with rows duplicated, reordered and
// dropped (decode_test.cc's schedule, with the given tokens), the
// log-probabilities of every step and (k > 0) its top k compared.
void check_decoder_steps(const ModelWeights& cpu, const ModelWeights& gpu,
                         const std::vector<std::vector<int32_t>>& sources, const std::vector<int32_t>& tokens,
                         int64_t k) {
  REQUIRE(sources.size() == 2);
  REQUIRE(tokens.size() >= 9);
  const int64_t src_len = static_cast<int64_t>(std::max(sources[0].size(), sources[1].size()));
  const DecoderLimits dl{.sentences = 2, .src_tokens = 2 * src_len, .src_len = src_len, .rows = 4, .steps = 6,
                         .top_k = std::max<int64_t>(k, 8)};
  IncrementalDecoder dc(cpu, dl), dg(gpu, dl);
  dc.start(sources, 4, 6);
  dg.start(sources, 4, 6);
  const auto start = static_cast<int32_t>(cpu.config().decoder_start_id);
  const std::vector<std::vector<IncrementalDecoder::Row>> steps = {
      {{0, 0, start}, {1, 0, start}},
      {{0, 0, tokens[0]}, {0, 0, tokens[1]}, {1, 1, tokens[2]}, {1, 1, tokens[3]}},
      {{1, 3, tokens[4]}, {0, 1, tokens[5]}, {0, 0, tokens[6]}},
      {{0, 2, tokens[7]}, {1, 0, tokens[8]}}};
  for (size_t t = 0; t < steps.size(); ++t) {
    INFO("step " << t);
    dc.step(steps[t]);
    dg.step(steps[t]);
    const Tensor a = dc.log_probs(), b = dg.log_probs();
    test::require_close({{"log-probs", b, test::to_f64(a), {1e-4, 1e-5}}});  // decode_test.cc's
    if (k > 0) check_top_k(dc, dg, k);
  }
}

// One training pass on both devices from the same initialization, with
// dropout (the same masks on both), compared as model_test.cc compares
// it; then (f32) one Adam update. Returns nothing: CHECKs.
void check_training_step(Transformer& cpu, Transformer& gpu, const HostBatch& batch, double loss_tol,
                         double grad_tol, double param_tol) {
  TrainStep step;
  step.seed = 23;
  step.rng_step = 2;
  const LossSums a = cpu.forward_backward(batch, step);
  const LossSums b = gpu.forward_backward(batch, step);
  gpu.stream().synchronize();
  INFO(dtype_name(gpu.dtype()) << ": loss cpu " << a.loss << " cuda " << b.loss);
  CHECK(a.tokens == b.tokens);
  CHECK(std::abs(a.loss - b.loss) <= loss_tol * std::abs(a.loss));
  CHECK(std::abs(a.nll - b.nll) <= loss_tol * std::abs(a.nll));
  const double grad_err = test::relative_error(test::to_f64(gpu.grads()), test::to_f64(cpu.grads()));
  INFO("gradient relative error " << grad_err);
  CHECK(grad_err < grad_tol);
  if (param_tol <= 0) return;
  Adam adam_cpu(cpu.params().shape(), DType::f32, cpu.stream());
  Adam adam_gpu(gpu.params().shape(), DType::f32, gpu.stream());
  adam_cpu.step(cpu.params(), cpu.grads(), 1e-3, 1, 1.0f, cpu.stream());
  adam_gpu.step(gpu.params(), gpu.grads(), 1e-3, 1, 1.0f, gpu.stream());
  gpu.stream().synchronize();
  const auto params = [](const Transformer& m) {
    return test::without_key_biases(test::to_f64(m.params()), m.layout());
  };
  const double param_err = test::relative_error(params(gpu), params(cpu));
  INFO("parameters after Adam (key biases left out: support.h), relative error " << param_err);
  CHECK(param_err < param_tol);
}

}  // namespace

TEST_CASE("beam search with the big preset's widths on cuda matches the cpu in fp32", "[decode][large]") {
  // big: D 1024, 16 heads of 64, F 4096; two layers and 8,192 words keep
  // the CPU's side to about a second.
  ModelConfig c = ModelConfig::preset("big");
  c.encoder_layers = c.decoder_layers = 2;
  c.vocab_size = 8192;
  REQUIRE(c.d_model == 1024);
  REQUIRE(c.heads == 16);
  REQUIRE(c.d_ff == 4096);
  ModelWeights cpu(c, Device::cpu()), gpu(c, Device::cuda(0));
  cpu.init(41);
  gpu.init(41);
  const auto sources = test::random_sentences(4, 5, 16, c.vocab_size, 61);
  check_decoder_steps(cpu, gpu, {sources[0], sources[1]}, {20, 21, 40, 41, 42, 22, 23, 8191, 4}, 0);
  BeamSearchOptions o;
  o.beam_size = 4;
  o.n_best = 4;
  std::vector<SearchRequest> batch;
  for (const auto& s : sources) batch.push_back({s, static_cast<int64_t>(s.size()) + 5, 0});
  // Sums of up to 21 log-probabilities, each within decode_test.cc's 1e-4.
  check_beam_search(cpu, gpu, batch, o, 1e-3);
}

TEST_CASE("sentences of 300 tokens on cuda: a training step and its attention weights match the cpu",
          "[model][attnviz][large]") {
  const HostBatch batch = [] {
    const auto src = sentences_of({300, 271, 257}, 211, 5), tgt = sentences_of({300, 263, 290}, 211, 9);
    return HostBatch::from_pairs(src, tgt);
  }();
  REQUIRE(batch.tgt_len == 301);  // the eos
  // fp32 with each kind of positions, and bf16 at model_test.cc's tolerances.
  struct Mode { DType dtype; bool learned; double loss_tol, grad_tol, param_tol, map_tol; };
  for (const Mode& mode : {Mode{DType::f32, false, 1e-5, 1e-4, 1e-5, 1e-5},
                           Mode{DType::f32, true, 1e-5, 1e-4, 1e-5, 1e-5},
                           Mode{DType::bf16, false, 2e-2, 8e-2, 0, 2e-2}}) {
    INFO(dtype_name(mode.dtype) << (mode.learned ? ", learned positions" : ", sinusoidal positions"));
    ModelConfig c = ModelConfig::preset("tiny");
    c.parse("vocab_size = 211\nd_model = 64\nd_ff = 128\nd_k = 16\nd_v = 16\nmax_positions = 512");
    c.dropout = 0.1f;
    c.attention_dropout = 0.1f;
    c.learned_positions = mode.learned;
    ModelLimits limits;
    limits.max_tokens = 1024;
    limits.max_len = 304;
    limits.loss_chunk = 256;  // four chunks of the 854 target rows
    Transformer cpu(c, limits, Device::cpu()), gpu(c, limits, Device::cuda(0), mode.dtype);
    cpu.init(12);
    gpu.init(12);
    REQUIRE(test::to_f64(cpu.params()) == test::to_f64(gpu.params()));
    // The weights of the training pass (taken before attention dropout),
    // read before Adam moves the parameters.
    TrainStep step;
    step.seed = 23;
    step.rng_step = 2;
    cpu.forward_backward(batch, step);
    gpu.forward_backward(batch, step);
    gpu.stream().synchronize();
    for (int64_t b : {0, 1, 2}) {
      const int64_t S = batch.src_lengths[static_cast<size_t>(b)], T = batch.tgt_lengths[static_cast<size_t>(b)];
      viz::SentenceAttention want, got;
      viz::read_attention(cpu, b, S, T, want);
      viz::read_attention(gpu, b, S, T, got);
      for (const auto& [name, w, g] : {std::tuple("enc", &want.enc, &got.enc),
                                       std::tuple("dec", &want.dec, &got.dec),
                                       std::tuple("cross", &want.cross, &got.cross)}) {
        REQUIRE(w->size() == g->size());
        double worst = 0;
        for (size_t i = 0; i < w->size(); ++i) worst = std::max(worst, std::abs(double((*w)[i]) - (*g)[i]));
        INFO("sentence " << b << " (S " << S << ", T " << T << ") " << name << ": worst difference " << worst);
        CHECK(worst <= mode.map_tol);
      }
    }
    // The same pass again, then its gradient and (f32) Adam's update.
    cpu.zero_grads();
    gpu.zero_grads();
    check_training_step(cpu, gpu, batch, mode.loss_tol, mode.grad_tol, mode.param_tol);
  }
}

TEST_CASE("a 64k vocabulary on cuda: a training step matches the cpu", "[model][large]") {
  ModelConfig c = ModelConfig::preset("tiny");
  c.parse("vocab_size = 65536\nd_model = 64\nd_ff = 128\nd_k = 16\nd_v = 16");
  c.dropout = 0.1f;
  ModelLimits limits;
  limits.max_tokens = 160;
  limits.max_len = 40;
  limits.loss_chunk = 24;  // 83 target rows: four chunks, the last partial
  auto src = sentences_of({30, 12, 25, 7}, c.vocab_size, 3), tgt = sentences_of({33, 9, 20, 17}, c.vocab_size, 7);
  tgt[0][0] = 65535;  // the last rows of the table and of the logits
  tgt[0][1] = 65534;
  src[1][0] = 65535;
  tgt[2].back() = 4;
  const HostBatch batch = HostBatch::from_pairs(src, tgt);
  REQUIRE(batch.target_tokens == 83);
  struct Mode { DType dtype; double loss_tol, grad_tol, param_tol; };
  for (const Mode& mode : {Mode{DType::f32, 1e-5, 1e-4, 1e-5}, Mode{DType::bf16, 2e-2, 8e-2, 0}}) {
    Transformer cpu(c, limits, Device::cpu()), gpu(c, limits, Device::cuda(0), mode.dtype);
    cpu.init(13);
    gpu.init(13);
    check_training_step(cpu, gpu, batch, mode.loss_tol, mode.grad_tol, mode.param_tol);
  }
}

TEST_CASE("a 64k vocabulary on cuda: the decoder's top k and beam search match the cpu", "[decode][large]") {
  ModelConfig c = ModelConfig::preset("tiny");
  c.parse("vocab_size = 65536\nd_model = 64\nd_ff = 128\nd_k = 16\nd_v = 16");
  ModelWeights cpu(c, Device::cpu()), gpu(c, Device::cuda(0));
  cpu.init(17);
  gpu.init(17);
  const std::vector<std::vector<int32_t>> sources = {{65535, 4, 30000, 65534, 12345},
                                                     {7, 8, 65000, 9, 10, 11, 50000}};
  // Top 16: the single-pass kernel's largest k (decode_test.cc).
  check_decoder_steps(cpu, gpu, sources, {65535, 4, 40000, 65534, 42, 64999, 23, 65533, 43}, 16);
  BeamSearchOptions o;
  o.beam_size = 4;
  o.n_best = 4;
  std::vector<SearchRequest> batch;
  for (const auto& s : test::random_sentences(6, 3, 12, c.vocab_size, 71))
    batch.push_back({s, static_cast<int64_t>(s.size()) + 4, 0});
  check_beam_search(cpu, gpu, batch, o, 5e-4);
}
