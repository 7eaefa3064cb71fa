// Vocabulary shortlists (libcore/decode/shortlist.h): the decoder scores
// each sentence over its own candidates (incremental.h), so a shortlist of
// every token changes no bit, a restricted one keeps every output in the
// sentence's set, and a sentence's results do not depend on its batch; the
// builder's candidates and the file's errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>

#include "libcore/data/tokenize.h"
#include "libcore/data/vocab.h"
#include "libcore/decode/incremental.h"
#include "libcore/decode/search.h"
#include "libcore/decode/shortlist.h"
#include "libcore/model/weights.h"
#include "tests/support.h"

using namespace tfm;

namespace {

constexpr int64_t kVocab = 41;

ModelConfig config(bool bias) {
  ModelConfig c = ModelConfig::preset("tiny");
  c.parse("vocab_size = 41\nd_model = 16\nd_ff = 24\nheads = 2\nd_k = 6\nd_v = 5\nmax_positions = 32");
  if (bias) c.parse("output_bias = true\ntie_output = false\nsource_eos = true");
  return c;
}

// f32 weights as tfm-decode runs them on the CPU: panels, or int8.
std::unique_ptr<ModelWeights> weights(const ModelConfig& c, bool int8) {
  auto m = std::make_unique<ModelWeights>(c, Device::cpu());
  m->init(7);
  if (int8) m->quantize_int8();
  m->pack_weights();
  return m;
}

const std::vector<std::vector<int32_t>> kSources = {{5, 6, 7, 8}, {9, 10}, {11, 12, 13}, {14, 5, 20, 21, 22}};

// Source id s gets targets (3 s + i) mod V, i < 3; every sentence 3 and 4.
Shortlist restricted() {
  std::vector<std::vector<int32_t>> lists(kVocab);
  for (int32_t s = 0; s < kVocab; ++s)
    for (int32_t i = 0; i < 3; ++i) lists[static_cast<size_t>(s)].push_back((3 * s + i) % kVocab);
  return Shortlist(kVocab, {3, 4}, lists);
}

Shortlist everything() {
  std::vector<int32_t> all(kVocab);
  std::iota(all.begin(), all.end(), 0);
  return Shortlist(kVocab, all, {});
}

std::vector<SearchRequest> requests(const std::vector<std::vector<int32_t>>& sources) {
  std::vector<SearchRequest> out;
  for (const auto& s : sources) out.push_back({s, 9, 0, 0});
  return out;
}

std::vector<std::vector<Hypothesis>> search(const ModelWeights& m, const std::vector<std::vector<int32_t>>& sources,
                                            const Shortlist* list, const BeamSearchOptions& o) {
  const std::vector<SearchRequest> batch = requests(sources);
  DecoderLimits l{.sentences = static_cast<int64_t>(sources.size()), .src_tokens = 64, .src_len = 8,
                  .rows = search_rows(static_cast<int64_t>(sources.size()), o), .steps = search_steps(batch),
                  .top_k = 2 * o.beam_size};
  IncrementalDecoder dec(m, l, list);
  return beam_search(dec, batch, o);
}

void require_same(const std::vector<Hypothesis>& a, const std::vector<Hypothesis>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].tokens == b[i].tokens);
    CHECK(a[i].token_log_probs == b[i].token_log_probs);  // bits
    CHECK(a[i].score == b[i].score);
  }
}

BeamSearchOptions beam(int64_t w) {
  BeamSearchOptions o;
  o.beam_size = w;
  o.n_best = w;
  return o;
}

}  // namespace

TEST_CASE("a shortlist of every token changes no bit", "[shortlist]") {
  const Shortlist all = everything();
  for (bool bias : {false, true}) {
    for (bool int8 : {false, true}) {
      INFO("output bias " << bias << ", int8 " << int8);
      const ModelConfig c = config(bias);
      const auto m = weights(c, int8);
      const auto plain = search(*m, kSources, nullptr, beam(3));
      const auto listed = search(*m, kSources, &all, beam(3));
      for (size_t s = 0; s < kSources.size(); ++s) require_same(plain[s], listed[s]);

      // One step's every read-out, bit for bit.
      DecoderLimits l{.sentences = 2, .src_tokens = 16, .src_len = 8, .rows = 2, .steps = 3, .top_k = 6};
      IncrementalDecoder a(*m, l), b(*m, l, &all);
      for (IncrementalDecoder* d : {&a, &b}) {
        d->start({kSources[0], kSources[1]}, 2, 3);
        d->step({{0, 0, static_cast<int32_t>(c.decoder_start_id)}, {1, 0, static_cast<int32_t>(c.decoder_start_id)}});
      }
      std::vector<double> va, vb;
      std::vector<int32_t> ia, ib;
      a.top_k(6, va, ia);
      b.top_k(6, vb, ib);
      CHECK(va == vb);
      CHECK(ia == ib);
      CHECK(a.log_prob_of(9) == b.log_prob_of(9));
      CHECK(test::to_f64(a.log_probs()) == test::to_f64(b.log_probs()));
    }
  }
}

TEST_CASE("under a shortlist a sentence's outputs are its candidates, normalized over them", "[shortlist]") {
  const Shortlist list = restricted();
  for (bool int8 : {false, true}) {
    INFO("int8 " << int8);
    const ModelConfig c = config(false);
    const auto m = weights(c, int8);
    const auto out = search(*m, kSources, &list, beam(2));
    for (size_t s = 0; s < kSources.size(); ++s) {
      const std::vector<int32_t> set = list.candidates(kSources[s], static_cast<int32_t>(c.eos_id), 4);
      for (const Hypothesis& h : out[s])
        for (int32_t t : h.tokens) CHECK(std::binary_search(set.begin(), set.end(), t));
    }

    DecoderLimits l{.sentences = 2, .src_tokens = 16, .src_len = 8, .rows = 2, .steps = 3, .top_k = 4};
    IncrementalDecoder d(*m, l, &list);
    d.start({kSources[0], kSources[1]}, 2, 3);
    d.step({{0, 0, static_cast<int32_t>(c.decoder_start_id)}, {1, 0, static_cast<int32_t>(c.decoder_start_id)}});
    std::vector<double> values;
    std::vector<int32_t> ids;
    d.top_k(4, values, ids);
    const std::vector<double> lp = test::to_f64(d.log_probs());
    for (int64_t r = 0; r < 2; ++r) {
      const std::vector<int32_t> set = list.candidates(kSources[static_cast<size_t>(r)], static_cast<int32_t>(c.eos_id), 4);
      double mass = 0;
      for (int32_t t = 0; t < kVocab; ++t) {
        const double v = lp[static_cast<size_t>(r * kVocab + t)];
        const bool in = std::binary_search(set.begin(), set.end(), t);
        CHECK(std::isfinite(v) == in);
        if (in) mass += std::exp(v);
        const double one = d.log_prob_of(t)[static_cast<size_t>(r)];
        CHECK(std::isfinite(one) == in);
        if (in) CHECK(one == Approx(v).margin(1e-5));
      }
      CHECK(mass == Approx(1.0).margin(1e-5));
      for (int64_t i = 0; i < 4; ++i) {
        const int32_t t = ids[static_cast<size_t>(r * 4 + i)];
        CHECK(std::binary_search(set.begin(), set.end(), t));
        CHECK(values[static_cast<size_t>(r * 4 + i)] == Approx(lp[static_cast<size_t>(r * kVocab + t)]).margin(1e-5));
      }
    }
  }
}

TEST_CASE("under a shortlist a sentence's results do not depend on its batch", "[shortlist]") {
  const Shortlist list = restricted();
  for (bool int8 : {false, true}) {
    INFO("int8 " << int8);
    const auto m = weights(config(true), int8);
    std::vector<std::vector<Hypothesis>> alone;
    for (const auto& s : kSources) alone.push_back(search(*m, {s}, &list, beam(3))[0]);
    const auto together = search(*m, kSources, &list, beam(3));
    for (size_t s = 0; s < kSources.size(); ++s) require_same(alone[s], together[s]);

    // Continuous batching: two sentences at a time, admitted as others end
    // (the union changes under sentences being decoded).
    const BeamSearchOptions o = beam(3);
    const DecoderLimits l{.sentences = 2, .src_tokens = 16, .src_len = 8, .rows = search_rows(2, o), .steps = 10,
                          .top_k = 6};
    std::vector<std::unique_ptr<IncrementalDecoder>> decoders;
    decoders.push_back(std::make_unique<IncrementalDecoder>(*m, l, &list));
    std::vector<std::vector<Hypothesis>> streamed(kSources.size());
    search_stream(decoders, requests(kSources), o,
                  [&](size_t i, std::vector<Hypothesis>&& nbest) { streamed[i] = std::move(nbest); });
    for (size_t s = 0; s < kSources.size(); ++s) require_same(alone[s], streamed[s]);
  }
}

TEST_CASE("a sentence's candidates are its pieces' lists, eos and every sentence's, at least k", "[shortlist]") {
  const Shortlist list = restricted();
  CHECK(list.candidates(std::vector<int32_t>{5}, 2, 4) == std::vector<int32_t>{2, 3, 4, 15, 16, 17});
  // Filled up with the smallest ids missing.
  CHECK(list.candidates(std::vector<int32_t>{5}, 2, 8) == std::vector<int32_t>{0, 1, 2, 3, 4, 15, 16, 17});
  CHECK(list.most(5, 1, 4) == 2 + 1 + 15 + 4);
  CHECK(list.most(1000, 2, 4) == kVocab);
}

TEST_CASE("tfm-tok shortlist ranks a corpus's co-occurrences by Dice", "[shortlist]") {
  test::TempDir dir;
  std::ofstream(dir.file("src")) << "a b\na c\nb c\na b\n";
  std::ofstream(dir.file("tgt")) << "x y\nx z\ny z\nx y\n";
  ShortlistBuildOptions o;
  o.output = dir.file("list");
  o.best = 2;
  o.frequent = 1;
  o.min_count = 2;
  const ShortlistBuildTotals n = build_shortlist(dir.file("src"), dir.file("tgt"), o);
  CHECK(n.pairs == 4);
  CHECK(n.sources == 3);
  CHECK(n.entries == 5);
  std::stringstream text;
  text << std::ifstream(dir.file("list")).rdbuf();
  // a: x (dice 6/6), y (4/6); z shares one pair only. b: y (6/6), x (4/6). c: z.
  CHECK(text.str() ==
        "tfm-shortlist 1 best=2 frequent=1 min-count=2 pairs=4 by=sentences\n\tx\na\tx y\nb\ty x\nc\tz\n");
  // Sides of different lengths: an error, and no file.
  std::ofstream(dir.file("short")) << "x\n";
  o.output = dir.file("none");
  CHECK_THAT(test::error_of([&] { build_shortlist(dir.file("src"), dir.file("short"), o); }),
             Catch::Contains("as many lines on each side"));
  CHECK(!std::ifstream(dir.file("none")).good());
}

TEST_CASE("tfm-tok shortlist --alignments ranks by links, c(s, t) / c(s)", "[shortlist]") {
  test::TempDir dir;
  std::ofstream(dir.file("src")) << "a b\na c\nb c\na b\n";
  std::ofstream(dir.file("tgt")) << "x y\nx z\ny z\nx y\n";
  // a-x twice and a-z once; b-y three times; c-x and c-z once each.
  std::ofstream(dir.file("links")) << "0-0 1-1\n0-1 1-0\n0-0 1-1\n0-0 1-1\n";
  ShortlistBuildOptions o;
  o.output = dir.file("list");
  o.alignments = dir.file("links");
  o.best = 2;
  o.frequent = 1;
  o.min_count = 1;
  const ShortlistBuildTotals n = build_shortlist(dir.file("src"), dir.file("tgt"), o);
  CHECK(n.pairs == 4);
  CHECK(n.links == 8);
  CHECK(n.sources == 3);
  CHECK(n.entries == 5);
  const auto read = [&](const std::string& path) {
    std::stringstream text;
    text << std::ifstream(path).rdbuf();
    return text.str();
  };
  // Sentence co-occurrence would rank z first for a and keep x for b.
  const std::string want = "tfm-shortlist 1 best=2 frequent=1 min-count=1 pairs=4 by=links\n\tx\na\tx z\nb\ty\nc\tx z\n";
  CHECK(read(dir.file("list")) == want);
  // tfm-decode --alignment pieces lines: the pieces and their links in one file.
  std::ofstream(dir.file("decoded")) << "x y ||| 0-0 1-1\nx z ||| 0-1 1-0\ny z ||| 0-0 1-1\nx y ||| 0-0 1-1\n";
  o.alignments = dir.file("decoded");
  o.output = dir.file("list2");
  build_shortlist(dir.file("src"), dir.file("decoded"), o);
  CHECK(read(dir.file("list2")) == want);
  // A link past its pair, and a file one line short: errors, no file.
  o.output = dir.file("none");
  std::ofstream(dir.file("past")) << "0-0 1-1\n0-2\n0-0\n0-0\n";
  o.alignments = dir.file("past");
  CHECK_THAT(test::error_of([&] { build_shortlist(dir.file("src"), dir.file("tgt"), o); }),
             Catch::Contains("past:2") && Catch::Contains("past the pair's 2 source and 2 target pieces"));
  std::ofstream(dir.file("short")) << "0-0\n0-0\n0-0\n";
  o.alignments = dir.file("short");
  CHECK_THAT(test::error_of([&] { build_shortlist(dir.file("src"), dir.file("tgt"), o); }),
             Catch::Contains("the links have a line for each sentence pair"));
  CHECK(!std::ifstream(dir.file("none")).good());
}

TEST_CASE("a shortlist file is read through the vocabulary, errors naming FILE:LINE", "[shortlist]") {
  test::TempDir dir;
  {
    std::ofstream text(dir.file("text"));
    for (int i = 0; i < 200; ++i) text << "a man number " << i << " rides a red bike past " << i * 7 << " dogs\n";
  }
  data::TrainOptions t;
  t.output = dir.file("spm.model");
  t.vocab_size = 60;
  data::train_vocab({dir.file("text")}, t);
  const Vocab v = Vocab::load(t.output);
  const std::string p5(v.piece(5)), p6(v.piece(6)), p7(v.piece(7)), p8(v.piece(8));
  auto write = [&](const std::string& body) {
    std::ofstream(dir.file("list"), std::ios::trunc) << body;
    return dir.file("list");
  };
  const Shortlist good = Shortlist::load(write("tfm-shortlist 1 best=2\n\t" + p8 + "\n" + p5 + "\t" + p6 + " " + p7 + "\n"),
                                         v, v.size());
  CHECK(good.candidates(std::vector<int32_t>{5}, 2, 1) == std::vector<int32_t>{2, 6, 7, 8});
  CHECK(good.candidates(std::vector<int32_t>{9}, 2, 1) == std::vector<int32_t>{2, 8});
  const std::string at = dir.file("list");
  auto error = [&](const std::string& body) { return test::error_of([&] { Shortlist::load(write(body), v, v.size()); }); };
  CHECK_THAT(error(""), Catch::Contains("an empty file"));
  CHECK_THAT(error("tfm-shortlist 2\n"), Catch::Contains("version 2") && Catch::Contains(at + ":1"));
  CHECK_THAT(error("hello\n"), Catch::Contains("not a shortlist") && Catch::Contains(at + ":1"));
  CHECK_THAT(error("tfm-shortlist 1\n" + p5 + " " + p6 + "\n"), Catch::Contains("SOURCE<TAB>TARGETS") &&
                                                                   Catch::Contains(at + ":2"));
  CHECK_THAT(error("tfm-shortlist 1\n" + p5 + "\tzzqqxx\n"),
             Catch::Contains("'zzqqxx' is not in the model's vocabulary") && Catch::Contains(at + ":2"));
  CHECK_THAT(error("tfm-shortlist 1\n" + p5 + "\t" + p6 + "\n" + p5 + "\t" + p7 + "\n"),
             Catch::Contains("has a line already") && Catch::Contains(at + ":3"));
  CHECK_THAT(error("tfm-shortlist 1\n\t" + p6 + "\n\t" + p7 + "\n"), Catch::Contains("a second line"));
  CHECK_THAT(error("tfm-shortlist 1\n" + p5 + "\t" + p6 + "\t" + p7 + "\n"), Catch::Contains("one tab"));
  // A model with fewer ids than the vocabulary's pieces.
  CHECK_THAT(test::error_of([&] { Shortlist::load(write("tfm-shortlist 1\n" + p5 + "\t" + p8 + "\n"), v, 7); }),
             Catch::Contains("past the model's 7 ids"));
}
