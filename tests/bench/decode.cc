// tests/bench/decode: beam-search throughput of the whole decoder in output
// tokens per second, on newstest2014's full English source (3003 sentences,
// ../shared/data), next to the same search written with PyTorch
// (decode_pytorch.py, fairseq's way, in the same --precision) on the same
// machine in the same run.
//
// The model is `base` (or --preset) with random weights; its vocabulary is
// the paper's 37,000, so the output layer costs what it would. Sources are
// ids from a 32,000-piece SentencePiece model (--spm; trained here with
// tfm::data::train_vocab on newstest2014 en+de, the WMT en-de 10k sample and
// Multi30k train en+de when the file is missing, then kept). Random weights
// would run every sentence to its maximum length, so each output length is
// forced to the length of the German reference in those pieces (eos is
// barred before it and forced at it): the work is that of a real model. The
// search is otherwise tfm-decode's: beam 4, batches of --max-tokens and
// --batch-size sorted by length, finished sentences leaving the batch.
//
// Targets: 3x PyTorch and 400 tokens/s on the CPU; 100,000 tokens/s on a GPU
// (and peak memory, the plan's total). --invariance N decodes the first N
// sentences alone and reports the share whose n-best lists and scores are
// bit-identical to the batched run's (100% on the CPU by design). The exit
// status says whether the targets were met (3 when not; 1 is an error).
//
// CTranslate2, on the CPU: the same model, written by tfm's CTranslate2
// writer (tfm-convert --to ct2 --ids: libcore/convert/ct2.h; for the
// paper's models byte-identical to CTranslate2's own spec API, for the
// others output-identical: tests/reference/ct2_export.sh), decoded by decode_ct2.py (run by the project's .venv/bin/python)
// in float32 and in int8 on the same sentences in tfm's batches, tokens/s
// side by side with tfm's and the ratios. With more than one thread each
// engine runs in both of its thread settings (tfm's threads taking whole
// batches or splitting each batch's rows, tfm-decode --threads-take;
// CTranslate2's inter_threads and intra_threads), and each is compared at
// its faster one, tfm's default said beside. CTranslate2 forces output
// lengths per call, not per sentence, so with random weights it needs
// --forced-length N (every output N tokens, e.g. 24). --preset demo is the demo's CPU model (2
// layers, d_model 128, 4,000 pieces; source ids folded into its
// vocabulary); --preset opus-mt is the shape of OPUS-MT's Marian models
// (6 + 6 layers, d_model 512, SiLU, a 58,101-piece vocabulary, sinusoids
// in halves, a logit bias, sources ending in eos: what tfm-convert makes of
// one); --model CKPT --input IDS decodes a trained checkpoint on ids
// (tfm-tok --ids) with natural lengths (|x| + 50 at most, plain length
// penalty as CTranslate2's), and reports the share of CTranslate2 float32's
// outputs identical to tfm's. --repeat N runs every engine and setting in
// turn N times and reports the medians (for shared machines).
//
// CTranslate2, on a GPU (--batch-sizes 32,64,..., with --forced-length N
// for random weights): tfm and CTranslate2 each at every batch size, the
// model loaded once a compute type (--ct2-types: bfloat16, float16,
// int8_bfloat16, and bfloat16@2, two batches in flight, its inter_threads
// on one GPU), a table of tokens/s a batch size, the ratio to CTranslate2's
// fastest setting at each size and at each engine's best, and the share of
// identical outputs (--sweep-out: the TSV). --tfm-in-flight N runs tfm at
// each size a second time with N batches in flight: N copies of the
// weights, each with a decoder and a stream of its own, a host thread each.
//
// tfm int8 (tfm-decode --precision int8): on the CPU in fp32 the same
// weights are also quantized into a second model, decoded in turn with the
// others, and its share of outputs identical to fp32's reported (--no-int8:
// not). --reference TEXT (with --model: the references of --input's lines)
// scores the best hypotheses of each, detokenized by the checkpoint's
// SentencePiece model, with tfm's sacreBLEU-exact BLEU.
//
// --shortlist FILE (tfm-tok shortlist's, in --spm's pieces or the
// checkpoint's): tfm fp32 and int8 also decode under the shortlist
// (tfm-decode --shortlist), each right after its run without, and say
// tokens/s, the speed-up, the share of identical outputs, and with
// --reference the BLEU of each. CTranslate2 decodes under the same lists
// too, as its vmap (use_vmap), at its faster thread setting of each run.
//
//   decode [--preset base|big|tiny|demo|opus-mt] [--device cpu] [--precision fp32] [--sentences N]
//          [--beam 4] [--max-tokens N] [--batch-size N] [--invariance N] [--forced-length N]
//          [--model CKPT --input IDS [--reference TEXT]] [--ct2 auto|on|off] [--repeat N] [--no-int8]
//          [--batch-sizes N,N,... [--ct2-types T,T@N,...] [--tfm-in-flight N] [--sweep-out FILE]]
//          [--spm FILE] [--data DIR] [--out FILE] [--no-reference] [--gemm-shapes] [--shortlist FILE]
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/gemm_rows.h"
#include "libcore/app/app.h"
#include "libcore/base/log.h"
#include "libcore/base/precision.h"
#include "libcore/convert/ct2.h"
#include "libcore/data/line_reader.h"
#include "libcore/data/tokenize.h"
#include "libcore/data/vocab.h"
#include "libcore/decode/shortlist.h"
#include "libcore/decode/translate.h"
#include "libcore/eval/bleu.h"
#include "libcore/io/atomic_file.h"
#include "libcore/model/model_file.h"
#include "libcore/model/batch.h"
#include "libcore/model/model_io.h"
#include "tests/bench/decode_reference.h"
#include "tests/bench/reference.h"

#ifndef TFM_BENCH_SOURCE_DIR
#define TFM_BENCH_SOURCE_DIR "tests/bench"
#endif

using namespace tfm;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMissed = 3;            // exit status when a target is missed
constexpr double kCpuRatio = 3.0;     // tfm tokens/s over PyTorch's, CPU
constexpr double kCpuTokens = 400;    // tokens/s, CPU (2 cores)
constexpr double kGpuTokens = 100000;  // tokens/s, GPU (H100 or H200)
constexpr int64_t kSpmVocab = 32000;

struct Options {
  CommonOptions common;
  std::string preset = "base", device = "cpu", precision = "fp32";
  int64_t sentences = 0, beam = 4, max_tokens = 8192, batch_size = 0, invariance = 0;
  std::string data = TFM_BENCH_SOURCE_DIR "/../../../shared/data";
  std::string spm = "decode.spm.model";
  std::string out = "decode.tsv";
  bool no_reference = false, gemm_shapes = false;
  std::string python = "/usr/bin/python3";
  std::string script = TFM_BENCH_SOURCE_DIR "/decode_pytorch.py";
  int64_t forced_length = 0;  // every output this long (0: the reference's length)
  std::string model, input;   // a trained checkpoint and its source ids
  std::string ct2 = "auto";
  std::string ct2_python = TFM_BENCH_SOURCE_DIR "/../../.venv/bin/python";
  std::string ct2_script = TFM_BENCH_SOURCE_DIR "/decode_ct2.py";
  int64_t repeat = 1;
  bool no_int8 = false;
  bool unpacked = false;
  bool no_refill = false;
  std::string reference;  // with --model: reference text of --input's lines, for BLEU
  std::string shortlist;  // tfm also under this vocabulary shortlist
  std::vector<int64_t> batch_sizes;  // on a GPU: tfm and CTranslate2 at each of these
  std::vector<std::string> ct2_types = {"bfloat16", "float16", "int8_bfloat16", "bfloat16@2"};
  int64_t in_flight = 1;  // with --batch-sizes: tfm also with this many batches in flight
  std::string sweep_out = "decode-sweep.tsv";
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The demo's CPU model (Makefile.data, demo_MODEL), or an OPUS-MT model as
// tfm-convert makes it (libcore/convert/hf.cc), random weights.
ModelConfig bench_config(const std::string& preset) {
  if (preset == "opus-mt") {
    ModelConfig c = ModelConfig::preset("base");
    c.parse("vocab_size = 58101\nactivation = silu\nposition_layout = halves\noutput_bias = true\n"
            "source_eos = true\ndecoder_start_id = 58100\neos_id = 0\nmax_positions = 512",
            "the opus-mt preset");
    return c;
  }
  if (preset != "demo") return ModelConfig::preset(preset);
  ModelConfig c = ModelConfig::preset("tiny");
  c.vocab_size = 4000;
  c.encoder_layers = c.decoder_layers = 2;
  c.d_model = 128;
  c.d_ff = 512;
  c.heads = 4;
  c.d_k = c.d_v = 32;
  c.max_positions = 1024;
  return c;
}

std::vector<std::string> read_lines(const std::string& path, int64_t limit) {
  data::LineReader reader(path);
  std::vector<std::string> lines;
  std::string line;
  while ((limit <= 0 || static_cast<int64_t>(lines.size()) < limit) && reader.next(line)) lines.push_back(line);
  return lines;
}

Vocab vocabulary(const Options& o, const std::string& news) {
  if (!fs::exists(o.spm)) {
    log::info("training the benchmark's SentencePiece model ({} pieces) into {}", kSpmVocab, o.spm);
    data::TrainOptions t;
    t.output = o.spm;
    t.vocab_size = kSpmVocab;
    data::train_vocab({news + ".en", news + ".de", o.data + "/wmt-en-de-10k-sample/src-train.txt.gz",
                       o.data + "/wmt-en-de-10k-sample/tgt-train.txt.gz",
                       o.data + "/multi30k/task1/raw/train.en.gz", o.data + "/multi30k/task1/raw/train.de.gz"},
                      t);
  }
  return Vocab::load(o.spm);
}

struct Run {
  std::vector<std::vector<Hypothesis>> nbest;
  int64_t tokens = 0;
  double seconds = 0, cpu_seconds = 0;
  std::string memory;
  std::string gemm_summary;  // GemmClock::summary (CPU)
  double device_wait = 0;    // IncrementalDecoder::device_wait_seconds
  double host_step = 0, host_start = 0;  // step_seconds, start_seconds
  double capture = 0, launch = 0;        // of host_step: StreamGraph's capture and launch
  int64_t graphs = 0, graphs_built = 0;  // its steps' CUDA graphs: launched, built (one a key)
  int64_t encoder_graphs = 0, encoder_graphs_built = 0;  // the encoder's, one an admission's padded shape
  int64_t steps = 0, rows = 0, rows_planned = 0;  // decoder steps, rows fed, rows a step may hold
};

// The search every engine here runs. A trained model's natural lengths:
// ranked as CTranslate2 ranks them (length^alpha), and its search ends a
// sentence once beam hypotheses have (CTranslate2 with a length penalty
// stops at beam x patience ended ones, patience 1), not at tfm-decode's
// default, the exact bound, which runs more steps for the same sentences.
// Forced lengths end every hypothesis at once: either rule stops there.
BeamSearchOptions search_options(const Options& o) {
  BeamSearchOptions s;
  s.beam_size = o.beam;
  s.early_stopping = EarlyStopping::beam;
  if (!o.model.empty()) s.length_penalty = LengthPenalty::plain;
  return s;
}

// `copies`: on a GPU, more copies of the model's weights, each on a stream
// of its own: a decoder a copy, each driven by a host thread of its own
// (search_stream), so that as many batches are in flight at once
// (CTranslate2's inter_threads on a GPU).
Run run_tfm(const Options& o, const ModelWeights& model, const std::vector<SearchRequest>& requests,
            ThreadWork work, const Shortlist* shortlist = nullptr,
            const std::vector<const ModelWeights*>& copies = {}) {
  TranslateOptions t;
  t.search = search_options(o);
  t.max_tokens = o.max_tokens;
  t.batch_size = o.batch_size;
  t.search.refill = !o.no_refill;
  std::vector<int64_t> lengths;
  for (const SearchRequest& r : requests) lengths.push_back(static_cast<int64_t>(r.source.size()));
  t.max_input_len = *std::max_element(lengths.begin(), lengths.end());
  // tfm-decode's decoders: one a thread where the threads take sentences on their own.
  std::vector<std::unique_ptr<IncrementalDecoder>> decoders;
  for (int d = 0; d < search_threads(model, omp_get_max_threads(), work); ++d)
    decoders.push_back(std::make_unique<IncrementalDecoder>(model, translate_limits(model, t), shortlist));
  for (const ModelWeights* copy : copies)
    decoders.push_back(std::make_unique<IncrementalDecoder>(*copy, translate_limits(*copy, t), shortlist));
  if (model.device().is_cpu()) {
    bench::GemmClock::install(o.gemm_shapes, /*any_m=*/true);
    bench::GemmClock::reset();
  }
  Run r;
  r.memory = "model " + model.memory_report() + "; decoder " + decoders[0]->memory_report();
  if (decoders.size() > 1)
    r.memory += fmt::format(" (x{}: a decoder a thread{})", decoders.size(), copies.empty() ? "" : ", a stream each");
  r.nbest.resize(requests.size());
  // tfm-decode's order: shortest first (stable), then continuous batching.
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return lengths[x] < lengths[y]; });
  std::vector<SearchRequest> sorted;
  for (size_t i : order) sorted.push_back(requests[i]);
  const auto start = Clock::now();
  const double cpu_start = bench::cpu_seconds();
  search_stream(decoders, sorted, t.search,
                [&](size_t i, std::vector<Hypothesis>&& got) { r.nbest[order[i]] = std::move(got); });
  model.stream().synchronize();
  for (const ModelWeights* copy : copies) copy->stream().synchronize();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.cpu_seconds = bench::cpu_seconds() - cpu_start;
  for (const auto& d : decoders) {
    r.device_wait += d->device_wait_seconds();
    r.host_step += d->step_seconds();
    r.host_start += d->start_seconds();
    r.capture += d->graph().capture_seconds();
    r.launch += d->graph().launch_seconds();
  }
  for (const auto& d : decoders) {
    r.steps += d->steps_run();
    r.rows += d->rows_fed();
  }
  r.rows_planned = decoders[0]->limits().rows;
  r.graphs = decoders[0]->graph().launches();
  r.graphs_built = decoders[0]->graph().instantiations();
  r.encoder_graphs = decoders[0]->encoder_graph().launches();
  r.encoder_graphs_built = decoders[0]->encoder_graph().instantiations();
  for (const auto& n : r.nbest) r.tokens += static_cast<int64_t>(n.at(0).tokens.size());
  if (model.device().is_cpu()) r.gemm_summary = bench::GemmClock::summary(r.seconds, 1, "run");
  return r;
}

// The share of the first n sentences whose n-best lists decoded alone are
// bit-identical to the batched ones.
double invariance_share(const Options& o, const ModelWeights& model, const std::vector<SearchRequest>& requests,
                        const Run& batched, int64_t n) {
  n = std::min<int64_t>(n, static_cast<int64_t>(requests.size()));
  TranslateOptions t;
  t.search = search_options(o);
  t.batch_size = 1;
  t.max_input_len = 1;
  for (int64_t i = 0; i < n; ++i) t.max_input_len = std::max<int64_t>(t.max_input_len, static_cast<int64_t>(requests[static_cast<size_t>(i)].source.size()));
  IncrementalDecoder decoder(model, translate_limits(model, t));
  int64_t same = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto alone = beam_search(decoder, {requests[static_cast<size_t>(i)]}, t.search)[0];
    const auto& ref = batched.nbest[static_cast<size_t>(i)];
    bool equal = alone.size() == ref.size();
    for (size_t k = 0; equal && k < ref.size(); ++k)
      equal = alone[k].tokens == ref[k].tokens && alone[k].score == ref[k].score;
    same += equal;
  }
  return n > 0 ? static_cast<double>(same) / static_cast<double>(n) : 1.0;
}

struct TorchResult {
  double tokens_per_s = 0, cpu_seconds = 0;
  int64_t tokens = 0;
  int threads = 0;
  std::string version;
};

TorchResult run_reference(const Options& o, const ModelConfig& c, const std::vector<SearchRequest>& requests,
                          Device device) {
  TFM_REQUIRE(c.heads * c.d_k == c.d_model && c.heads * c.d_v == c.d_model && c.share_embeddings &&
                  !c.learned_positions && !c.pre_norm,
              "the PyTorch reference builds post-norm models with shared embeddings, sinusoids "
              "and d_k = d_v = d_model / heads");
  char dir_template[] = "/tmp/tfm-bench-decode-XXXXXX";
  TFM_REQUIRE(mkdtemp(dir_template) != nullptr, "cannot make a temporary directory");
  const std::string dir = dir_template;
  std::string ids, lengths;
  for (const SearchRequest& r : requests) {
    for (size_t i = 0; i < r.source.size(); ++i) ids += fmt::format("{}{}", i ? " " : "", r.source[i]);
    ids += '\n';
    lengths += fmt::format("{}\n", r.max_len);
  }
  io::write_file_atomic(dir + "/ids", ids);
  io::write_file_atomic(dir + "/lengths", lengths);
  const std::string cmd = fmt::format(
      "{} {} --ids {}/ids --lengths {}/lengths --vocab {} --layers {} --d-model {} --d-ff {} "
      "--heads {} --beam {} --max-tokens {} --batch-size {} --threads {} --device {} --precision {}",
      o.python, o.script, dir, dir, c.vocab_size, c.decoder_layers, c.d_model, c.d_ff, c.heads, o.beam,
      o.max_tokens, o.batch_size, cpu_threads(), device.is_cuda() ? fmt::format("cuda:{}", device.index) : "cpu",
      o.precision);
  const std::string result = bench::run_reference(cmd, o.python);
  fs::remove_all(dir);
  TorchResult r;
  char version[128] = {0};
  long long tokens = 0;
  if (std::sscanf(result.c_str(), "tokens_per_s=%lf %*s cpu_seconds=%lf %*s tokens=%lld threads=%d torch=%127s",
                  &r.tokens_per_s, &r.cpu_seconds, &tokens, &r.threads, version) != 5 || !(r.tokens_per_s > 0))
    fail("the PyTorch reference printed an unexpected result: {}", result);
  r.tokens = tokens;
  r.version = version;
  return r;
}

// CTranslate2 on the same model: the model converted once (prepare), then
// decoded in float32 or int8 (run).
struct Ct2Result {
  double tokens_per_s = 0, seconds = 0, cpu_seconds = 0;
  int64_t tokens = 0;
  int threads = 0;
  std::string version, compute_type, isa, sgemm, gemm_s8;
  std::vector<std::string> hyps;  // ids, one line a sentence
};

class Ct2 {
 public:
  // Converts `model` (saved first when it is not o.model's checkpoint).
  // The sources without the eos tfm's requests end in where the model
  // reads one: CTranslate2 adds it (add_source_eos).
  // With a shortlist, the model directory gets it as CTranslate2's
  // vmap.txt (run(..., vmap) decodes under it): the same lists, in ids.
  Ct2(const Options& o, const ModelWeights& model, const std::vector<SearchRequest>& requests,
      const Shortlist* shortlist)
      : o_(o) {
    char dir_template[] = "/tmp/tfm-bench-ct2-XXXXXX";
    TFM_REQUIRE(mkdtemp(dir_template) != nullptr, "cannot make a temporary directory");
    dir_ = dir_template;
    std::string ids, lengths;
    const size_t framed = model.config().source_eos ? 1 : 0;
    for (const SearchRequest& r : requests) {
      for (size_t i = 0; i + framed < r.source.size(); ++i) ids += fmt::format("{}{}", i ? " " : "", r.source[i]);
      ids += '\n';
      lengths += fmt::format("{}\n", r.max_len);
    }
    io::write_file_atomic(dir_ + "/ids", ids);
    if (o.model.empty()) io::write_file_atomic(dir_ + "/lengths", lengths);
    std::string checkpoint = o.model;
    if (checkpoint.empty()) {
      checkpoint = dir_ + "/model.bin";
      save_model(checkpoint, model);
    }
    try {
      convert::Ct2Options ids;
      ids.ids = true;
      convert::write_ct2(ModelFile(checkpoint), dir_ + "/ct2", ids);
      if (shortlist) io::write_file_atomic(dir_ + "/ct2/vmap.txt", vmap(*shortlist));
    } catch (const Error&) {
      fs::remove_all(dir_);
      throw;
    }
  }
  ~Ct2() { fs::remove_all(dir_); }
  Ct2(const Ct2&) = delete;
  Ct2& operator=(const Ct2&) = delete;

  // inter: the threads take whole batches (inter_threads); else each batch
  // is split between them (intra_threads).
  Ct2Result run(const std::string& compute_type, bool inter, bool vmap = false) const {
    const std::string cmd = command(compute_type, o_.max_tokens,
                                    fmt::format("--batch-size {} --threads {} {} {}", o_.batch_size, cpu_threads(),
                                                inter ? "--inter" : "", vmap ? "--use-vmap" : ""));
    Ct2Result r = parse(bench::run_reference(cmd, o_.ct2_python, "CTranslate2", "--ct2 off times tfm without it"));
    r.hyps = read_lines(dir_ + "/hyps", 0);
    return r;
  }

  // On a GPU: one run a batch size, the model loaded once (decode_ct2.py
  // --batch-sizes), `workers` batches in flight (inter_threads).
  std::vector<Ct2Result> sweep(const std::string& compute_type, int workers, const std::vector<int64_t>& sizes,
                               int64_t max_tokens, Device device) const {
    const std::string cmd = command(
        compute_type, max_tokens,
        fmt::format("--batch-sizes {} --device cuda:{} --threads {} {}", fmt::join(sizes, ","), device.index,
                    workers, workers > 1 ? "--inter" : ""));
    std::vector<Ct2Result> out;
    for (const std::string& line :
         bench::run_reference_lines(cmd, o_.ct2_python, "CTranslate2", "--ct2 off times tfm without it")) {
      Ct2Result& r = out.emplace_back(parse(line));
      r.hyps = read_lines(fmt::format("{}/hyps.{}", dir_, sizes.at(out.size() - 1)), 0);
    }
    TFM_REQUIRE(out.size() == sizes.size(), "decode_ct2.py reported {} of {} batch sizes", out.size(), sizes.size());
    return out;
  }

 private:
  // CTranslate2's vocabulary map: "SOURCE<TAB>TARGET ..." a line, the
  // empty source for the tokens every batch gets; tokens named by their ids
  // (write_ct2's ids). It adds its own unk, bos and eos.
  static std::string vmap(const Shortlist& list) {
    std::string text = fmt::format("\t{}\n", fmt::join(list.always(), " "));
    for (int32_t s = 0; s < list.vocab_size(); ++s)
      if (const auto t = list.targets(s); !t.empty()) text += fmt::format("{}\t{}\n", s, fmt::join(t, " "));
    return text;
  }

  std::string command(const std::string& compute_type, int64_t max_tokens, const std::string& more) const {
    return fmt::format("{} {} --model {}/ct2 --ids {}/ids {} --beam {} --alpha 0.6 --max-tokens {} {} "
                       "--compute-type {} --hyps {}/hyps",
                       o_.ct2_python, o_.ct2_script, dir_, dir_,
                       o_.model.empty() ? fmt::format("--lengths {}/lengths", dir_) : "", o_.beam, max_tokens, more,
                       compute_type, dir_);
  }

  static Ct2Result parse(const std::string& result) {
    Ct2Result r;
    char version[64] = {0}, type[32] = {0}, isa[32] = {0}, sgemm[32] = {0}, s8[32] = {0};
    long long tokens = 0;
    if (std::sscanf(result.c_str(),
                    "tokens_per_s=%lf seconds=%lf cpu_seconds=%lf %*s tokens=%lld threads=%d ct2=%63s "
                    "compute_type=%31s isa=%31s sgemm=%31s gemm_s8=%31s",
                    &r.tokens_per_s, &r.seconds, &r.cpu_seconds, &tokens, &r.threads, version, type, isa, sgemm,
                    s8) != 10 || !(r.tokens_per_s > 0))
      fail("decode_ct2.py printed an unexpected result: {}", result);
    r.tokens = tokens;
    r.version = version;
    r.compute_type = type;
    r.isa = isa;
    r.sgemm = sgemm;
    r.gemm_s8 = s8;
    return r;
  }

  const Options& o_;
  std::string dir_;
};

// The share of sentences whose best hypothesis CTranslate2 and tfm agree on.
// The best hypotheses of a run as ids, one line a sentence (as Ct2Result::hyps).
std::vector<std::string> id_lines(const Run& run) {
  std::vector<std::string> lines;
  for (const auto& nbest : run.nbest) lines.push_back(fmt::format("{}", fmt::join(nbest.at(0).tokens, " ")));
  return lines;
}

// The share of sentences on which two runs' best hypotheses agree.
double same_share(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  if (a.size() != b.size() || a.empty()) return 0;
  int64_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  return static_cast<double>(same) / static_cast<double>(a.size());
}

// Corpus BLEU (sacreBLEU's defaults) of id lines, detokenized by `vocab`.
double bleu_of(const std::vector<std::string>& ids, const Vocab& vocab, const std::vector<std::string>& refs) {
  TFM_REQUIRE(ids.size() == refs.size(), "--reference has {} lines but {} sentences were decoded", refs.size(),
              ids.size());
  std::vector<std::string> hyps;
  for (const std::string& line : ids) {
    std::vector<int32_t> tokens;
    std::istringstream words(line);
    for (int32_t id; words >> id;) tokens.push_back(id);
    hyps.push_back(vocab.decode_ids(tokens));
  }
  const eval::BleuOptions options;
  eval::BleuStats total;
  for (const eval::BleuStats& st : eval::bleu_corpus_stats(hyps, {refs}, options)) total += st;
  return eval::compute_bleu(total, options).score;
}

// On a GPU: tfm and CTranslate2 at each of --batch-sizes (sentences a
// batch; the token cut raised so that the size binds), CTranslate2 in each
// of --ct2-types (a compute type, "@N": N batches in flight, its
// inter_threads), tfm also with `copies` (--tfm-in-flight: 1 + copies
// batches in flight, run_tfm), on the same sentences, batches and lengths;
// each engine's best, and tfm's best over CTranslate2's best at each size
// and at each one's best.
void gpu_sweep(const Options& o, const ModelWeights& model, const std::vector<SearchRequest>& requests,
               const Ct2& ct2, const std::string& name, const std::vector<const ModelWeights*>& copies) {
  const std::vector<int64_t>& sizes = o.batch_sizes;
  struct Setting {
    std::string label, type;
    int workers = 1;
    std::vector<Ct2Result> runs;  // one a size
  };
  std::vector<Setting> settings;
  for (const std::string& t : o.ct2_types) {
    Setting& st = settings.emplace_back();
    st.label = t;
    const size_t at = t.find('@');
    st.type = t.substr(0, at);
    if (at != std::string::npos) {
      const std::string n = t.substr(at + 1);
      TFM_REQUIRE(!n.empty() && n.find_first_not_of("0123456789") == std::string::npos && std::stoi(n) >= 1,
                  "--ct2-types: '{}' is not TYPE or TYPE@N (N batches in flight)", t);
      st.workers = std::stoi(n);
    }
  }
  int64_t longest = 0;
  for (const SearchRequest& r : requests) longest = std::max<int64_t>(longest, static_cast<int64_t>(r.source.size()));
  const int64_t max_tokens = longest * *std::max_element(sizes.begin(), sizes.end());
  const std::string flights = fmt::format("tfm@{}", copies.size() + 1);
  std::vector<double> tfm, tfm_flights;  // tokens/s, one a size; with `copies`, in flight (0: not run)
  std::vector<int64_t> tfm_tokens;
  std::vector<std::vector<std::string>> tfm_lines;
  for (const int64_t size : sizes) {
    Options at = o;
    at.batch_size = size;
    at.max_tokens = max_tokens;
    const Run r = run_tfm(at, model, requests, ThreadWork::rows);
    tfm.push_back(static_cast<double>(r.tokens) / r.seconds);
    tfm_lines.push_back(id_lines(r));
    std::printf("sweep: tfm, batches of %lld: %lld tokens in %.2f s, %.1f tokens/s (host waited %.2f s)\n",
                static_cast<long long>(size), static_cast<long long>(r.tokens), r.seconds, tfm.back(),
                r.device_wait);
    std::fflush(stdout);
    tfm_tokens.push_back(r.tokens);
    tfm_flights.push_back(0);
    if (copies.empty()) continue;
    try {
      const Run f = run_tfm(at, model, requests, ThreadWork::rows, nullptr, copies);
      tfm_flights.back() = static_cast<double>(f.tokens) / f.seconds;
      std::printf("sweep: %s, batches of %lld: %lld tokens in %.2f s, %.1f tokens/s (hosts waited %.2f s); "
                  "best hypotheses the same as one in flight's: %.1f%%\n",
                  flights.c_str(), static_cast<long long>(size), static_cast<long long>(f.tokens), f.seconds,
                  tfm_flights.back(), f.device_wait, 100 * same_share(id_lines(f), tfm_lines.back()));
    } catch (const Error& e) {
      std::printf("sweep: %s, batches of %lld: not run: %s\n", flights.c_str(), static_cast<long long>(size),
                  e.what());
    }
    std::fflush(stdout);
  }
  std::string tsv = "model\tbatch_size\tengine\tsetting\ttokens_per_s\tsame_share\n";
  for (Setting& st : settings) {
    try {
      st.runs = ct2.sweep(st.type, st.workers, sizes, max_tokens, model.device());
    } catch (const Error& e) {
      std::printf("sweep: ctranslate2 %s: not run: %s\n", st.label.c_str(), e.what());
      continue;
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      const Ct2Result& r = st.runs[i];
      if (o.model.empty())
        TFM_REQUIRE(r.tokens == tfm_tokens[i], "CTranslate2 {} produced {} tokens, tfm {}: not the same work",
                    st.label, r.tokens, tfm_tokens[i]);
      std::printf("sweep: ctranslate2 %s %s, batches of %lld: %lld tokens in %.2f s, %.1f tokens/s\n",
                  r.version.c_str(), st.label.c_str(), static_cast<long long>(sizes[i]),
                  static_cast<long long>(r.tokens), r.seconds, r.tokens_per_s);
    }
    std::fflush(stdout);
  }
  // The table: a row a batch size.
  std::printf("\n%-10s %6s %11s", "model", "batch", "tfm");
  if (!copies.empty()) std::printf(" %11s", flights.c_str());
  for (const Setting& st : settings) std::printf(" %16s", ("ct2 " + st.label).c_str());
  std::printf(" %14s %11s\n", "tfm/best ct2", "same lines");
  double tfm_best = 0, ct2_best = 0;
  std::string ct2_best_at, tfm_best_at;
  for (size_t i = 0; i < sizes.size(); ++i) {
    double best = 0;
    const Ct2Result* best_run = nullptr;
    std::printf("%-10s %6lld %11.1f", name.c_str(), static_cast<long long>(sizes[i]), tfm[i]);
    tsv += fmt::format("{}\t{}\ttfm\t{}\t{:.1f}\t\n", name, sizes[i], o.precision, tfm[i]);
    if (!copies.empty()) {
      std::printf(" %11s", tfm_flights[i] > 0 ? fmt::format("{:.1f}", tfm_flights[i]).c_str() : "-");
      if (tfm_flights[i] > 0)
        tsv += fmt::format("{}\t{}\ttfm\t{}@{}\t{:.1f}\t\n", name, sizes[i], o.precision, copies.size() + 1,
                           tfm_flights[i]);
    }
    const double mine = std::max(tfm[i], tfm_flights[i]);  // tfm's faster setting at this size
    for (const Setting& st : settings) {
      if (st.runs.empty()) {
        std::printf(" %16s", "-");
        continue;
      }
      const Ct2Result& r = st.runs[i];
      const double same = same_share(tfm_lines[i], r.hyps);
      std::printf(" %16.1f", r.tokens_per_s);
      tsv += fmt::format("{}\t{}\tctranslate2 {}\t{}\t{:.1f}\t{:.4f}\n", name, sizes[i], r.version, st.label,
                         r.tokens_per_s, same);
      if (r.tokens_per_s > best) best = r.tokens_per_s, best_run = &r;
      if (r.tokens_per_s > ct2_best) ct2_best = r.tokens_per_s, ct2_best_at = fmt::format("{} at {}", st.label, sizes[i]);
    }
    if (mine > tfm_best)
      tfm_best = mine, tfm_best_at = fmt::format("{}{}", sizes[i], mine > tfm[i] ? ", " + flights : "");
    std::printf(" %14s %11s\n", best > 0 ? fmt::format("{:.2f}x", mine / best).c_str() : "-",
                best_run ? fmt::format("{:.1f}%", 100 * same_share(tfm_lines[i], best_run->hyps)).c_str() : "-");
  }
  if (ct2_best > 0)
    std::printf("each at its best: tfm %.1f tokens/s (batches of %s) / ctranslate2 %.1f (%s) = %.2fx\n", tfm_best,
                tfm_best_at.c_str(), ct2_best, ct2_best_at.c_str(), tfm_best / ct2_best);
  std::printf("tfm/best ct2: tfm's faster setting at the size over CTranslate2's; same lines: the share of "
              "sentences whose best hypothesis is the same in tfm's %s (one in flight) and the faster "
              "CTranslate2 setting's. Written to %s\n", o.precision.c_str(), o.sweep_out.c_str());
  io::write_file_atomic(o.sweep_out, tsv);
}

}  // namespace

int main(int argc, char** argv) {
  prefer_sleeping_threads(argv);  // and the PyTorch child inherits the same policy
  Options o;
  CLI::App app{"Decoding benchmark: tfm beam search against PyTorch on newstest2014."};
  add_common_options(app, o.common);
  app.add_option("--preset", o.preset,
                 "Model preset: base, big, tiny, demo (the demo's CPU model) or opus-mt (OPUS-MT's shape)")
      ->capture_default_str();
  app.add_option("--device", o.device, "cpu, or cuda[:N]")->capture_default_str();
  app.add_option("--precision", o.precision, "fp32, or bf16 / fp16 on cuda")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))->capture_default_str();
  app.add_option("--sentences", o.sentences, "The first N sentences (0: all 3003)")
      ->check(tfm::AtLeast(int64_t{0}))->capture_default_str();
  app.add_option("--beam", o.beam, "Beam size")->check(tfm::AtLeast(int64_t{1}))->capture_default_str();
  app.add_option("--max-tokens", o.max_tokens, "Source tokens of a batch")
      ->check(tfm::AtLeast(int64_t{1}))->capture_default_str();
  app.add_option("--batch-size", o.batch_size,
                 "Sentences of a batch (0: tfm-decode's default, 32 on the CPU and 256 on a GPU)")
      ->check(tfm::AtLeast(int64_t{0}))->capture_default_str();
  app.add_option("--invariance", o.invariance, "Decode the first N sentences alone too and compare")
      ->check(tfm::AtLeast(int64_t{0}))->capture_default_str();
  app.add_option("--data", o.data, "The shared data folder")->capture_default_str();
  app.add_option("--spm", o.spm, "SentencePiece model (trained there when missing)")->capture_default_str();
  app.add_option("--out", o.out, "Write the results as TSV to this file")->capture_default_str();
  app.add_flag("--no-reference", o.no_reference, "Time tfm alone (no PyTorch, no ratio)");
  app.add_flag("--gemm-shapes", o.gemm_shapes, "Print sgemm's time per weight shape (CPU)");
  app.add_option("--python", o.python, "Interpreter with torch for the reference")->capture_default_str();
  app.add_option("--script", o.script, "The PyTorch reference script")->capture_default_str();
  app.add_option("--forced-length", o.forced_length, "Force every output to N tokens (0: the reference's length)")
      ->check(tfm::AtLeast(int64_t{0}))->capture_default_str();
  app.add_option("--model", o.model, "A trained checkpoint instead of the preset's random weights (with --input)");
  app.add_option("--input", o.input, "Source ids for --model, one sentence a line (tfm-tok --ids)");
  app.add_option("--ct2", o.ct2, "CTranslate2 float32 and int8 beside tfm: auto (when the CPU decodes, lengths "
                                 "allow and ctranslate2 imports), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))->capture_default_str();
  app.add_option("--ct2-python", o.ct2_python, "Interpreter with ctranslate2")->capture_default_str();
  app.add_option("--repeat", o.repeat, "Run tfm and CTranslate2 in turn N times; medians")
      ->check(tfm::AtLeast(int64_t{1}))->capture_default_str();
  app.add_flag("--no-int8", o.no_int8, "Do not also decode with tfm's int8 weights (CPU, fp32)");
  app.add_flag("--unpacked", o.unpacked,
               "On the CPU: the decoder's GEMMs (fp32 and int8) copy their weights into panels each call "
               "(A/B of ModelWeights::pack_weights, which tfm-decode calls)");
  app.add_flag("--no-refill", o.no_refill,
               "Decode a batch at a time, no sentence joining before the whole batch has finished (A/B of "
               "continuous batching, which tfm-decode does)");
  app.add_option("--batch-sizes", o.batch_sizes,
                 "On a GPU: tfm and CTranslate2 (--ct2 on) at each of these batch sizes, comma-separated")
      ->delimiter(',')->check(tfm::AtLeast(int64_t{1}));
  app.add_option("--ct2-types", o.ct2_types,
                 "With --batch-sizes: CTranslate2's compute types, TYPE@N for N batches in flight (inter_threads)")
      ->delimiter(',')->capture_default_str();
  app.add_option("--tfm-in-flight", o.in_flight,
                 "With --batch-sizes: tfm also with N batches in flight, each decoder on a copy of the weights "
                 "and a stream of its own, driven by a host thread of its own (CTranslate2's TYPE@N)")
      ->check(tfm::AtLeast(int64_t{1}))->capture_default_str();
  app.add_option("--sweep-out", o.sweep_out, "With --batch-sizes: the sweep as TSV")->capture_default_str();
  app.add_option("--shortlist", o.shortlist, "Decode under this vocabulary shortlist too (fp32, int8)");
  app.add_option("--reference", o.reference, "With --model: reference text of --input's lines; BLEU of each");
  int status = 0;
  const int rc = run_program("decode", app, argc, argv, o.common, [&] {
    const Device device = select_device(parse_device(o.device));
    if (o.batch_size == 0) o.batch_size = default_batch_size(device);
    const Precision precision = kDecodePrecision.resolve(kDecodePrecision.parse("--precision", o.precision), device);
    const DType dtype = compute_dtype(precision);
    TFM_REQUIRE(o.model.empty() == o.input.empty(), "--model and --input go together");
    TFM_REQUIRE(o.batch_sizes.empty() || device.is_cuda(), "--batch-sizes sweeps tfm and CTranslate2 on a GPU");
    TFM_REQUIRE(o.in_flight == 1 || !o.batch_sizes.empty(), "--tfm-in-flight goes with --batch-sizes");
    std::vector<SearchRequest> requests;
    int64_t src_tokens = 0;
    ModelConfig config;
    std::unique_ptr<ModelWeights> model;
    std::optional<ModelFile> file;  // its SentencePiece model serves --reference
    std::optional<Vocab> bench_vocab;  // without --model: --spm's, which maps --shortlist's pieces
    if (!o.model.empty()) {
      file.emplace(o.model);
      model = file->load_weights(device, precision);
      config = model->config();
      for (const std::string& line : read_lines(o.input, o.sentences)) {
        SearchRequest r;
        std::istringstream words(line);
        for (std::string id; words >> id;) r.source.push_back(std::stoi(id));
        if (r.source.empty()) continue;
        for (int32_t id : r.source)
          TFM_REQUIRE(id >= 0 && id < config.vocab_size, "{}: id {} outside the model's vocabulary", o.input, id);
        r.max_len = static_cast<int64_t>(r.source.size()) + 50;  // tfm-decode's default, natural lengths
        r.source = Framing::of(config).source(std::move(r.source));  // as tfm-decode frames it
        src_tokens += static_cast<int64_t>(r.source.size());
        requests.push_back(std::move(r));
      }
      TFM_REQUIRE(!requests.empty(), "{} has no sentence", o.input);
    } else {
      const std::string news = o.data + "/wmt14/newstest2014-full/newstest2014.en-de";
      bench_vocab.emplace(vocabulary(o, news));
      const Vocab& vocab = *bench_vocab;
      const std::vector<std::string> src = read_lines(news + ".en", o.sentences), ref = read_lines(news + ".de", o.sentences);
      TFM_REQUIRE(src.size() == ref.size() && !src.empty(), "{}.en and .de differ in length", news);
      config = bench_config(o.preset);
      if (o.preset != "demo") config.vocab_size = std::max(config.vocab_size, vocab.size());  // tiny's 64 would not hold the ids
      const int32_t V = static_cast<int32_t>(config.vocab_size);
      for (size_t i = 0; i < src.size(); ++i) {
        SearchRequest r;
        r.source = vocab.encode_ids(src[i]);
        for (int32_t& id : r.source)
          if (id >= V) id = 4 + (id - 4) % (V - 4);  // the demo's 4,000: folded, past the reserved ids
        const int64_t forced = o.forced_length > 0 ? o.forced_length : static_cast<int64_t>(vocab.encode_ids(ref[i]).size());
        // Within tfm-decode's limit a |x| + b (a = 1, b = 50), as the plan assumes.
        r.max_len = r.min_len = std::min<int64_t>(forced, static_cast<int64_t>(r.source.size()) + 50);
        r.source = Framing::of(config).source(std::move(r.source));  // as tfm-decode frames it
        src_tokens += static_cast<int64_t>(r.source.size());
        requests.push_back(std::move(r));
      }
      model = std::make_unique<ModelWeights>(config, device, dtype);
      model->init(1);
      model->refresh_weights();
    }
    if (!o.unpacked) model->pack_weights();  // as tfm-decode: a no-op but on the CPU
    TFM_REQUIRE(o.reference.empty() || !o.model.empty(), "--reference goes with --model");
    // The model's weights once more, made as they were (the checkpoint, or
    // the preset's seed), at precision p: int8 beside fp32, and
    // --tfm-in-flight's copies.
    const auto same_weights = [&](Precision p) {
      if (file) return file->load_weights(device, p);
      auto w = std::make_unique<ModelWeights>(config, device, dtype);
      w->init(1);
      if (p == Precision::int8) w->quantize_int8();
      else w->refresh_weights();
      return w;
    };
    // The same weights in int8, decoded in turn with fp32 (CPU).
    std::unique_ptr<ModelWeights> model8;
    if (!o.no_int8 && device.is_cpu() && dtype == DType::f32) {
      model8 = same_weights(Precision::int8);
      if (!o.unpacked) model8->pack_weights();
    }
    std::optional<Shortlist> shortlist;
    if (!o.shortlist.empty()) {
      const Vocab* v = file ? file->vocab() : &*bench_vocab;
      TFM_REQUIRE(v, "{} embeds no SentencePiece model to read --shortlist with", o.model);
      shortlist.emplace(Shortlist::load(o.shortlist, *v, config.vocab_size));
    }
    const std::string name = o.model.empty() ? o.preset : fs::path(o.model).filename().string();
    std::string kernel;
    if (device.is_cpu()) {
      // The decoder's products run tfm's row-invariant GEMM, the encoder's
      // OpenBLAS; and the threads' wait policy (libcore/app/app.h), which moves
      // a small model's figure by ~1.5x and the CTranslate2 child inherits.
      const char* policy = std::getenv("OMP_WAIT_POLICY");
      kernel = fmt::format(", decoder GEMMs tfm's row-invariant {} (int8: {}), encoder OpenBLAS {} ({}), OpenMP wait "
                           "policy {}",
                           fmt::format("{} kernel", ops::cpu::row_gemm_path_name(ops::cpu::RowGemmPath::best)),
                           ops::cpu::gemm_int8_amx()    ? "AMX tiles"
                           : ops::cpu::gemm_int8_vnni() ? "AVX-512 VNNI"
                                                        : ops::cpu::row_gemm_path_name(ops::cpu::gemm_int8_path()),
                           ops::cpu::blas().core, ops::cpu::blas().core_source,
                           policy ? policy : "libgomp's default");
    }
    std::printf("%s model (%.1f M parameters) on %s%s (%d threads), %s; %zu sentences, %lld source "
                "tokens, beam %lld, batches of <= %lld tokens and %lld sentences; %s\n",
                name.c_str(), config.parameter_count() / 1e6,
                device.is_cpu() ? cpu_name().c_str() : device.str().c_str(), kernel.c_str(), cpu_threads(),
                o.precision.c_str(), requests.size(), static_cast<long long>(src_tokens),
                static_cast<long long>(o.beam), static_cast<long long>(o.max_tokens),
                static_cast<long long>(o.batch_size),
                !o.model.empty() ? "natural output lengths (plain length penalty)"
                : o.forced_length > 0 ? fmt::format("every output forced to {} tokens", o.forced_length).c_str()
                                      : "outputs forced to the references' lengths");
    std::fflush(stdout);

    // CTranslate2: where it runs, and why not where it does not.
    std::string ct2_skip;
    if (o.ct2 == "off") ct2_skip = "--ct2 off";
    else if (!device.is_cpu() && o.batch_sizes.empty())
      ct2_skip = "on a GPU CTranslate2 is compared in the --batch-sizes sweep";
    else if (o.model.empty() && o.forced_length == 0)
      ct2_skip = "CTranslate2 forces one output length a call: --forced-length N";
    TFM_REQUIRE(o.ct2 != "on" || ct2_skip.empty(), "--ct2 on: {}", ct2_skip);
    std::unique_ptr<Ct2> ct2;
    if (ct2_skip.empty()) {
      try {
        ct2 = std::make_unique<Ct2>(o, *model, requests, shortlist ? &*shortlist : nullptr);
      } catch (const Error& e) {
        if (o.ct2 == "on") throw;
        ct2_skip = e.what();
      }
    }

    // Each engine in each of its thread settings (on the CPU, with more
    // than one thread): tfm's threads taking whole batches or splitting
    // each batch's rows, CTranslate2's inter_threads and intra_threads,
    // fp32 and int8, in turn, --repeat times: medians. Each engine is
    // compared at its faster setting; tfm's default is said beside.
    const bool both_settings = device.is_cpu() && cpu_threads() > 1;
    // tfm-decode's default (auto) on these sentences: how many decoders its
    // window would run.
    const auto default_work = [&](const ModelWeights& m) {
      const size_t teams = static_cast<size_t>(search_threads(m, cpu_threads()));
      const size_t run = search_teams(m, ThreadWork::automatic, teams, requests.size(), o.batch_size);
      return run > 1 ? ThreadWork::batches : ThreadWork::rows;
    };
    const ThreadWork work = default_work(*model);
    const ThreadWork other = work == ThreadWork::batches ? ThreadWork::rows : ThreadWork::batches;
    const ThreadWork work8 = model8 ? default_work(*model8) : ThreadWork::rows;
    const ThreadWork other8 = work8 == ThreadWork::batches ? ThreadWork::rows : ThreadWork::batches;
    Run mine, mine8, listed, listed8;  // listed: under --shortlist
    std::vector<double> listed_tps, listed8_tps;
    // A run under the shortlist right after its run without: tokens/s of
    // both, the speed-up, the share of identical outputs.
    const auto run_listed = [&](const char* what, const ModelWeights& m, ThreadWork w, const Run& without) {
      const Run r = run_tfm(o, m, requests, w, &*shortlist);
      const double with_tps = static_cast<double>(r.tokens) / r.seconds;
      const double without_tps = static_cast<double>(without.tokens) / without.seconds;
      std::printf("tfm %s shortlist: %lld tokens in %.1f s, %.1f tokens/s, %.2fx the %.1f without; outputs "
                  "identical on %.1f%% of the sentences\n%s: %s\n",
                  what, static_cast<long long>(r.tokens), r.seconds, with_tps, with_tps / without_tps, without_tps,
                  100 * same_share(id_lines(without), id_lines(r)), what, r.memory.c_str());
      std::fflush(stdout);
      return r;
    };
    Ct2Result c32, c8, v32, v8;  // v: under --shortlist as CTranslate2's vmap
    std::vector<double> v32_tps, v8_tps;
    std::vector<double> tfm_tps, tfm_cpu, t8_tps, t8_cpu, c32_tps, c32_cpu, c8_tps, c8_cpu;
    std::vector<double> alt_tps, alt8_tps, c32_inter, c32_intra, c8_inter, c8_intra;
    for (int64_t rep = 0; rep < o.repeat; ++rep) {
      mine = run_tfm(o, *model, requests, work);
      tfm_tps.push_back(static_cast<double>(mine.tokens) / mine.seconds);
      tfm_cpu.push_back(mine.cpu_seconds);
      std::printf("tfm: %s\ntfm: %lld tokens in %.1f s, %.1f tokens/s (threads take %s)\n%s", mine.memory.c_str(),
                  static_cast<long long>(mine.tokens), mine.seconds, tfm_tps.back(),
                  std::string(thread_work_name(work)).c_str(), mine.gemm_summary.c_str());
      std::printf("tfm: %lld decoder steps of %.1f rows on average, %.0f%% of the %lld a step may hold (%s)\n",
                  static_cast<long long>(mine.steps),
                  static_cast<double>(mine.rows) / static_cast<double>(std::max<int64_t>(1, mine.steps)),
                  100.0 * static_cast<double>(mine.rows) /
                      static_cast<double>(std::max<int64_t>(1, mine.steps * mine.rows_planned)),
                  static_cast<long long>(mine.rows_planned),
                  o.no_refill ? "a batch at a time" : "continuous batching");
      if (model->device().is_cuda())
        std::printf("tfm: the host waited for the device %.3f s of %.3f s (%.0f%%); %lld steps as CUDA "
                    "graphs, %lld graphs built; %lld admissions' encoders as graphs, %lld built\n",
                    mine.device_wait, mine.seconds, 100 * mine.device_wait / mine.seconds,
                    static_cast<long long>(mine.graphs), static_cast<long long>(mine.graphs_built),
                    static_cast<long long>(mine.encoder_graphs), static_cast<long long>(mine.encoder_graphs_built));
      if (model->device().is_cuda())
        std::printf("tfm: the host's own time: steps queued %.3f s (graph capture %.3f, build and "
                    "launch %.3f), encoder queued %.3f s, the search's bookkeeping and the rest %.3f s\n",
                    mine.host_step, mine.capture, mine.launch, mine.host_start,
                    mine.seconds - mine.device_wait - mine.host_step - mine.host_start);
      std::fflush(stdout);
      if (shortlist) {
        listed = run_listed("fp32", *model, work, mine);
        listed_tps.push_back(static_cast<double>(listed.tokens) / listed.seconds);
      }
      if (both_settings) {
        const Run alt = run_tfm(o, *model, requests, other);
        TFM_REQUIRE(id_lines(alt) == id_lines(mine), "tfm's threads taking {} gave other outputs than taking {}",
                    thread_work_name(other), thread_work_name(work));
        alt_tps.push_back(static_cast<double>(alt.tokens) / alt.seconds);
        std::printf("tfm: %lld tokens in %.1f s, %.1f tokens/s (threads take %s; the same outputs)\n",
                    static_cast<long long>(alt.tokens), alt.seconds, alt_tps.back(),
                    std::string(thread_work_name(other)).c_str());
        std::fflush(stdout);
      }
      if (model8) {
        mine8 = run_tfm(o, *model8, requests, work8);
        t8_tps.push_back(static_cast<double>(mine8.tokens) / mine8.seconds);
        t8_cpu.push_back(mine8.cpu_seconds);
        std::printf("tfm int8: %lld tokens in %.1f s, %.1f tokens/s (threads take %s)\n",
                    static_cast<long long>(mine8.tokens), mine8.seconds, t8_tps.back(),
                    std::string(thread_work_name(work8)).c_str());
        if (shortlist) {
          listed8 = run_listed("int8", *model8, work8, mine8);
          listed8_tps.push_back(static_cast<double>(listed8.tokens) / listed8.seconds);
        }
        if (both_settings) {
          const Run alt8 = run_tfm(o, *model8, requests, other8);
          alt8_tps.push_back(static_cast<double>(alt8.tokens) / alt8.seconds);
          std::printf("tfm int8: %lld tokens in %.1f s, %.1f tokens/s (threads take %s)\n",
                      static_cast<long long>(alt8.tokens), alt8.seconds, alt8_tps.back(),
                      std::string(thread_work_name(other8)).c_str());
        }
        std::fflush(stdout);
      }
      if (!ct2 || !device.is_cpu()) continue;  // on a GPU: the sweep below
      try {
        // inter_threads (whole batches a thread) and intra_threads (each
        // batch split); the faster counts, in this run.
        const Ct2Result i32 = ct2->run("float32", true), i8 = ct2->run("int8", true);
        c32_inter.push_back(i32.tokens_per_s);
        c8_inter.push_back(i8.tokens_per_s);
        c32 = i32;
        c8 = i8;
        bool inter32 = true, inter8 = true;  // the faster setting, this run
        if (both_settings) {
          const Ct2Result a32 = ct2->run("float32", false), a8 = ct2->run("int8", false);
          c32_intra.push_back(a32.tokens_per_s);
          c8_intra.push_back(a8.tokens_per_s);
          if (a32.tokens_per_s > c32.tokens_per_s) c32 = a32, inter32 = false;
          if (a8.tokens_per_s > c8.tokens_per_s) c8 = a8, inter8 = false;
          std::printf("ctranslate2 %s intra_threads: float32 %.1f tokens/s, int8 %.1f tokens/s\n",
                      a32.version.c_str(), a32.tokens_per_s, a8.tokens_per_s);
        }
        std::printf("ctranslate2 %s inter_threads: float32 %.1f tokens/s, int8 %.1f tokens/s\n",
                    i32.version.c_str(), i32.tokens_per_s, i8.tokens_per_s);
        if (shortlist) {
          // Its vmap on the same lists, at its faster setting of this run.
          v32 = ct2->run("float32", inter32, true);
          v8 = ct2->run("int8", inter8, true);
          v32_tps.push_back(v32.tokens_per_s);
          v8_tps.push_back(v8.tokens_per_s);
          std::printf("ctranslate2 vmap: float32 %.1f tokens/s (%.2fx without, %s), int8 %.1f (%.2fx, %s); "
                      "outputs identical to its own without on %.1f%% and %.1f%% of the sentences\n",
                      v32.tokens_per_s, v32.tokens_per_s / c32.tokens_per_s, inter32 ? "inter_threads" : "intra_threads",
                      v8.tokens_per_s, v8.tokens_per_s / c8.tokens_per_s, inter8 ? "inter_threads" : "intra_threads",
                      100 * same_share(c32.hyps, v32.hyps), 100 * same_share(c8.hyps, v8.hyps));
        }
      } catch (const Error& e) {
        if (o.ct2 == "on") throw;
        ct2_skip = e.what();
        ct2.reset();
        continue;
      }
      if (o.model.empty())
        TFM_REQUIRE(c32.tokens == mine.tokens && c8.tokens == mine.tokens,
                    "CTranslate2 produced {} and {} tokens, tfm {}: not the same work", c32.tokens, c8.tokens,
                    mine.tokens);
      c32_tps.push_back(c32.tokens_per_s);
      c32_cpu.push_back(c32.cpu_seconds);
      c8_tps.push_back(c8.tokens_per_s);
      c8_cpu.push_back(c8.cpu_seconds);
      std::fflush(stdout);
    }
    if (!ct2_skip.empty()) std::printf("ctranslate2: not run: %s\n", ct2_skip.c_str());
    if (shortlist) {
      std::string line = fmt::format("shortlist, medians of {} runs (tokens/s): fp32 {:.1f} with, {:.1f} without ({:.2f}x)",
                                     listed_tps.size(), median(listed_tps), median(tfm_tps),
                                     median(listed_tps) / median(tfm_tps));
      if (!listed8_tps.empty())
        line += fmt::format("; int8 {:.1f} with, {:.1f} without ({:.2f}x)", median(listed8_tps), median(t8_tps),
                            median(listed8_tps) / median(t8_tps));
      std::printf("%s\n", line.c_str());
      if (!v32_tps.empty()) {
        // Each engine under the same lists, CTranslate2 at its faster setting.
        std::printf("ctranslate2 vmap, the same lists, medians (tokens/s): float32 %.1f with, %.1f without "
                    "(%.2fx); int8 %.1f with, %.1f without (%.2fx)\n",
                    median(v32_tps), median(c32_tps), median(v32_tps) / median(c32_tps), median(v8_tps),
                    median(c8_tps), median(v8_tps) / median(c8_tps));
        std::printf("both under the shortlist, tfm over CTranslate2: fp32 %.2fx%s\n",
                    median(listed_tps) / median(v32_tps),
                    listed8_tps.empty() ? ""
                                        : fmt::format(", int8 {:.2f}x", median(listed8_tps) / median(v8_tps)).c_str());
      }
    }
    const bool has_ct2 = !c32_tps.empty();
    // Each run's ratios, the engines having run next to each other: on a
    // shared machine whose speed drifts, their spread says how far the
    // table's ratio of medians can be trusted.
    if (has_ct2 && c32_tps.size() > 1) {
      const auto per_run = [](const std::vector<double>& a, const std::vector<double>& b) {
        std::vector<double> r;
        std::string text;
        for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
          r.push_back(a[i] / b[i]);
          text += fmt::format(" {:.2f}x", r.back());
        }
        return fmt::format("{} (median {:.2f}x)", text, median(r));
      };
      std::printf("each run's ratio, tfm over CTranslate2: f32/f32%s", per_run(tfm_tps, c32_tps).c_str());
      if (!t8_tps.empty()) std::printf("; i8/i8%s", per_run(t8_tps, c8_tps).c_str());
      std::printf("\n");
    }
    const double same = has_ct2 && !o.model.empty() ? same_share(id_lines(mine), c32.hyps) : -1;
    const bool has_int8 = !t8_tps.empty();
    if (has_int8)
      std::printf("tfm int8: outputs identical to tfm fp32's on %.1f%% of the sentences\n",
                  same_share(id_lines(mine), id_lines(mine8)) * 100);
    if (!o.reference.empty()) {
      TFM_REQUIRE(file->vocab(), "{} embeds no SentencePiece model to score --reference with", o.model);
      const Vocab& vocab = *file->vocab();
      const std::vector<std::string> refs = read_lines(o.reference, o.sentences);
      const double b32 = bleu_of(id_lines(mine), vocab, refs);
      std::string line = fmt::format("BLEU on {}: tfm fp32 {:.2f}", o.reference, b32);
      if (has_int8) {
        const double b8 = bleu_of(id_lines(mine8), vocab, refs);
        line += fmt::format(", tfm int8 {:.2f} ({:+.2f})", b8, b8 - b32);
      }
      if (shortlist) {
        const double l32 = bleu_of(id_lines(listed), vocab, refs);
        line += fmt::format("; under the shortlist: fp32 {:.2f} ({:+.2f})", l32, l32 - b32);
        if (has_int8) {
          const double b8 = bleu_of(id_lines(mine8), vocab, refs), l8 = bleu_of(id_lines(listed8), vocab, refs);
          line += fmt::format(", int8 {:.2f} ({:+.2f})", l8, l8 - b8);
        }
      }
      if (has_ct2)
        line += fmt::format(", ctranslate2 float32 {:.2f}, int8 {:.2f}", bleu_of(c32.hyps, vocab, refs),
                            bleu_of(c8.hyps, vocab, refs));
      if (!v32_tps.empty())
        line += fmt::format("; ctranslate2 vmap float32 {:.2f}, int8 {:.2f}", bleu_of(v32.hyps, vocab, refs),
                            bleu_of(v8.hyps, vocab, refs));
      std::printf("%s\n", line.c_str());
    }
    if (has_ct2)
      std::printf("ctranslate2: %s, ISA %s, SGEMM %s, int8 GEMM %s, %d threads%s\n", c32.version.c_str(),
                  c32.isa.c_str(), c32.sgemm.c_str(), c8.gemm_s8.c_str(), c32.threads,
                  same >= 0 ? fmt::format("; float32 outputs identical to tfm's on {:.1f}% of the sentences",
                                          same * 100).c_str() : "");

    const double share = o.invariance > 0 ? invariance_share(o, *model, requests, mine, o.invariance) : -1;
    TorchResult ref_result;
    // decode_pytorch.py builds the paper's model: not a checkpoint's, nor opus-mt's variants.
    const bool run_torch = !o.no_reference && o.model.empty() && o.preset != "opus-mt";
    if (!o.no_reference && !o.model.empty())
      std::printf("pytorch: not run: its reference builds random weights, not a checkpoint's\n");
    else if (!o.no_reference && o.preset == "opus-mt")
      std::printf("pytorch: not run: its reference builds the paper's model, not opus-mt's variants\n");
    if (run_torch) {
      ref_result = run_reference(o, config, requests, device);
      TFM_REQUIRE(ref_result.tokens == mine.tokens, "PyTorch produced {} tokens, tfm {}: not the same work",
                  ref_result.tokens, mine.tokens);
      std::printf("pytorch: torch %s, %d threads\n", ref_result.version.c_str(), ref_result.threads);
    }
    const double tps = median(tfm_tps);
    const double tfm_cpu_s = median(tfm_cpu);
    const bool has_ref = ref_result.tokens_per_s > 0;
    const double ratio = has_ref ? tps / ref_result.tokens_per_s : 0;
    const bool ok = device.is_cpu() ? tps >= kCpuTokens && (!has_ref || ratio >= kCpuRatio) : tps >= kGpuTokens;
    const std::string verdict =
        device.is_cpu() ? fmt::format("{} (>= {:.0f} tok/s{})", ok ? "ok" : "SLOW", kCpuTokens,
                                      has_ref ? fmt::format(", >= {:.0f}x", kCpuRatio) : "")
                        : fmt::format("{} (>= {:.0f} tok/s)", ok ? "ok" : "SLOW", kGpuTokens);
    // Tokens per CPU-second of the process (all its threads) times the
    // threads it may use: what the wall clock would show on an idle
    // machine, when others share this one.
    const double cpu_tps = static_cast<double>(mine.tokens) / tfm_cpu_s * cpu_threads();
    const double ref_cpu_tps = has_ref ? static_cast<double>(ref_result.tokens) / ref_result.cpu_seconds * cpu_threads() : 0;
    auto num = [](bool have, double v, const char* f = "{:.1f}") { return have ? fmt::format(fmt::runtime(f), v) : std::string("-"); };
    std::printf("\n%-10s %-7s %-5s %8s %9s %10s %11s %7s %11s %11s %7s %10s  %s\n", "model", "device", "prec",
                "tokens", "seconds", "tfm tok/s", "torch tok/s", "ratio", "tfm cpu-t/s", "torch cpu-t/s",
                "ratio", "invariant", "verdict");
    std::printf("%-10s %-7s %-5s %8lld %9.1f %10.1f %11s %7s %11.1f %11s %7s %10s  %s\n", name.c_str(),
                device.str().c_str(), o.precision.c_str(), static_cast<long long>(mine.tokens),
                static_cast<double>(mine.tokens) / tps, tps, num(has_ref, ref_result.tokens_per_s).c_str(),
                num(has_ref, ratio, "{:.2f}x").c_str(), cpu_tps, num(has_ref, ref_cpu_tps).c_str(),
                num(has_ref, cpu_tps / ref_cpu_tps, "{:.2f}x").c_str(),
                share >= 0 ? fmt::format("{:.1f}%", share * 100).c_str() : "-", verdict.c_str());
    const double c32_t = median(c32_tps), c8_t = median(c8_tps), t8 = median(t8_tps);
    const double c32_cpu_tps = has_ct2 ? static_cast<double>(c32.tokens) / median(c32_cpu) * cpu_threads() : 0;
    const double c8_cpu_tps = has_ct2 ? static_cast<double>(c8.tokens) / median(c8_cpu) * cpu_threads() : 0;
    const double t8_cpu_tps = has_int8 ? static_cast<double>(mine8.tokens) / median(t8_cpu) * cpu_threads() : 0;
    if (has_ct2 || has_int8) {
      // tfm fp32 and int8 beside CTranslate2 float32 and int8, on the wall clock
      // and per CPU-second; ratios fp32 / float32 and int8 / int8.
      std::printf("\n%-10s %10s %10s %11s %10s %8s %8s %11s %11s %11s %10s %8s %8s\n", "model", "tfm f32",
                  "tfm i8", "ct2 f32", "ct2 i8", "f32/f32", "i8/i8", "tfm f32 cpu", "tfm i8 cpu", "ct2 f32 cpu",
                  "ct2 i8 cpu", "f32/f32", "i8/i8");
      auto ratio_of = [](bool have, double a, double b) { return have && b > 0 ? fmt::format("{:.2f}x", a / b) : std::string("-"); };
      std::printf("%-10s %10.1f %10s %11s %10s %8s %8s %11.1f %11s %11s %10s %8s %8s\n", name.c_str(), tps,
                  num(has_int8, t8).c_str(), num(has_ct2, c32_t).c_str(), num(has_ct2, c8_t).c_str(),
                  ratio_of(has_ct2, tps, c32_t).c_str(), ratio_of(has_ct2 && has_int8, t8, c8_t).c_str(), cpu_tps,
                  num(has_int8, t8_cpu_tps).c_str(), num(has_ct2, c32_cpu_tps).c_str(),
                  num(has_ct2, c8_cpu_tps).c_str(), ratio_of(has_ct2, cpu_tps, c32_cpu_tps).c_str(),
                  ratio_of(has_ct2 && has_int8, t8_cpu_tps, c8_cpu_tps).c_str());
    }
    // Every thread setting of each engine, and each at its best.
    const auto setting = [&](ThreadWork w, double f32, double i8) {
      return std::pair{w == work ? f32 : median(alt_tps), w == work8 ? i8 : median(alt8_tps)};
    };
    if (both_settings && (has_ct2 || !alt_tps.empty())) {
      const auto [b32, b8] = setting(ThreadWork::batches, tps, t8);
      const auto [r32, r8] = setting(ThreadWork::rows, tps, t8);
      const double ci32 = median(c32_inter), ca32 = median(c32_intra), ci8 = median(c8_inter), ca8 = median(c8_intra);
      std::printf("\n%-40s %10s %10s\n", "thread settings, medians (tokens/s)", "fp32", "int8");
      std::printf("%-40s %10.1f %10s\n", "tfm, threads take batches", b32, num(has_int8, b8).c_str());
      std::printf("%-40s %10.1f %10s\n", "tfm, threads take rows", r32, num(has_int8, r8).c_str());
      if (has_ct2) {
        std::printf("%-40s %10.1f %10.1f\n", "ctranslate2, inter_threads", ci32, ci8);
        std::printf("%-40s %10.1f %10.1f\n", "ctranslate2, intra_threads", ca32, ca8);
        const double tfm_best32 = std::max(b32, r32), tfm_best8 = std::max(b8, r8);
        const double ct2_best32 = std::max(ci32, ca32), ct2_best8 = std::max(ci8, ca8);
        const auto name_of = [](bool first, const char* a, const char* b) { return first ? a : b; };
        const std::string best_line = fmt::format(
            "each at its best: fp32 {:.2f}x (tfm {} / ctranslate2 {}){}; tfm's default ({}) / ctranslate2's "
            "best: fp32 {:.2f}x{}",
            tfm_best32 / ct2_best32, name_of(b32 >= r32, "batches", "rows"),
            name_of(ci32 >= ca32, "inter_threads", "intra_threads"),
            has_int8 ? fmt::format(", int8 {:.2f}x (tfm {} / ctranslate2 {})", tfm_best8 / ct2_best8,
                                   name_of(b8 >= r8, "batches", "rows"),
                                   name_of(ci8 >= ca8, "inter_threads", "intra_threads"))
                     : std::string(),
            thread_work_name(work), tps / ct2_best32,
            has_int8 ? fmt::format(", int8 {:.2f}x", t8 / ct2_best8) : std::string());
        std::printf("%s\n", best_line.c_str());
      }
    }
    std::printf("\nsearch, every engine: beam %lld, alpha 0.6 (%s), a sentence ends once %lld hypotheses have "
                "(CTranslate2's rule: tfm-decode --early-stopping beam; its default, the exact bound, runs more "
                "steps)\n",
                static_cast<long long>(o.beam), o.model.empty() ? "gnmt" : "plain: length^alpha",
                static_cast<long long>(o.beam));
    std::printf("output tokens (eos not counted) per second of beam search, batching and encoder "
                "included; cpu-t/s: per CPU-second used x %d threads (the verdict is on the wall clock)%s. "
                "Written to %s\n", cpu_threads(),
                o.repeat > 1 ? fmt::format("; medians of {} runs, tfm and CTranslate2 in turn", o.repeat).c_str() : "",
                o.out.c_str());
    const auto opt = [](bool have, double v) { return have ? fmt::format("{:.1f}", v) : std::string(); };
    std::string tsv =
        "preset\tdevice\tprecision\tsentences\tbeam\tmax_tokens\tbatch_size\tthreads\ttokens\tseconds\t"
        "tfm_tokens_per_s\ttorch_tokens_per_s\tratio\ttfm_cpu_seconds\ttorch_cpu_seconds\tinvariant_share\tok\t"
        "ct2_version\tct2_f32_tokens_per_s\tct2_int8_tokens_per_s\tct2_f32_ratio\tct2_int8_ratio\t"
        "ct2_f32_cpu_seconds\tct2_int8_cpu_seconds\tct2_same_share\trepeat\ttfm_int8_tokens_per_s\t"
        "tfm_int8_cpu_seconds\ttfm_threads_take\ttfm_other_tokens_per_s\ttfm_int8_other_tokens_per_s\t"
        "ct2_f32_inter_tokens_per_s\tct2_f32_intra_tokens_per_s\tct2_int8_inter_tokens_per_s\t"
        "ct2_int8_intra_tokens_per_s\n";
    tsv += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{:.3f}\t{:.1f}\t{}\t{}\t{:.3f}\t{}\t{}\t{}\t"
                       "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
                       name, device.str(), o.precision, requests.size(), o.beam, o.max_tokens, o.batch_size,
                       cpu_threads(), mine.tokens, static_cast<double>(mine.tokens) / tps, tps,
                       has_ref ? fmt::format("{:.1f}", ref_result.tokens_per_s) : "",
                       has_ref ? fmt::format("{:.3f}", ratio) : "", tfm_cpu_s,
                       has_ref ? fmt::format("{:.3f}", ref_result.cpu_seconds) : "",
                       share >= 0 ? fmt::format("{:.4f}", share) : "", ok ? 1 : 0, has_ct2 ? c32.version : "",
                       has_ct2 ? fmt::format("{:.1f}", c32_t) : "", has_ct2 ? fmt::format("{:.1f}", c8_t) : "",
                       has_ct2 ? fmt::format("{:.3f}", tps / c32_t) : "", has_ct2 ? fmt::format("{:.3f}", tps / c8_t) : "",
                       has_ct2 ? fmt::format("{:.3f}", median(c32_cpu)) : "",
                       has_ct2 ? fmt::format("{:.3f}", median(c8_cpu)) : "",
                       same >= 0 ? fmt::format("{:.4f}", same) : "", o.repeat,
                       has_int8 ? fmt::format("{:.1f}", t8) : "", has_int8 ? fmt::format("{:.3f}", median(t8_cpu)) : "",
                       thread_work_name(work), opt(!alt_tps.empty(), median(alt_tps)),
                       opt(!alt8_tps.empty(), median(alt8_tps)), opt(!c32_inter.empty(), median(c32_inter)),
                       opt(!c32_intra.empty(), median(c32_intra)), opt(!c8_inter.empty(), median(c8_inter)),
                       opt(!c8_intra.empty(), median(c8_intra)));
    io::write_file_atomic(o.out, tsv);
    if (!o.batch_sizes.empty()) {
      // --tfm-in-flight: copies of the weights, made as the model was.
      std::vector<std::unique_ptr<ModelWeights>> owned;
      std::vector<const ModelWeights*> copies;
      for (int64_t n = 1; n < o.in_flight; ++n) copies.push_back(owned.emplace_back(same_weights(precision)).get());
      if (ct2) gpu_sweep(o, *model, requests, *ct2, name, copies);
      else std::printf("sweep: not run: %s\n", ct2_skip.c_str());
    }
    status = ok ? 0 : kMissed;
  });
  return rc != 0 ? rc : status;
}
