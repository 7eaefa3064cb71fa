#include "libcore/train/setup.h"

#include <filesystem>
#include <optional>
#include <string_view>

#include "libcore/base/error.h"
#include "libcore/base/log.h"
#include "libcore/data/vocab.h"
#include "libcore/io/checkpoint.h"
#include "libcore/model/model_file.h"
#include "libcore/train/ranks.h"

namespace tfm::train {
namespace {

// The options that change what a resumed run computes: changing one on
// resume is allowed, but the run no longer continues exactly.
constexpr const char* kTrajectoryKeys[] = {"lr-schedule", "lr-scale", "lr", "min-lr", "warmup", "decay-steps",
                                           "adam-beta1", "adam-beta2", "adam-eps", "weight-decay",
                                           "update-freq", "seed", "clip-norm", "precision"};

// Whether `file` lies in directory `dir`.
bool same_directory(const std::string& file, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path parent = fs::path(file).parent_path();
  return fs::equivalent(parent.empty() ? fs::path(".") : parent, dir, ec);
}

// ------------------------------------------------------------ the checkpoint
// What a resumed run continues from.
struct Resumed {
  explicit Resumed(const std::string& path) : file(path), state(read_state(file.reader())) {}
  const std::string& path() const { return file.path(); }
  ModelFile file;  // checked as a model first
  TrainState state;
};

std::optional<Resumed> read_resumed(const TrainRequest& req) {
  if (req.resume.empty()) return std::nullopt;
  std::optional<Resumed> r(std::in_place, CheckpointDir::resume_path(req.resume));
  check_model_overrides(r->file.config(), req.overrides, r->path());
  return r;
}

// `options`: the run's, before --max-tokens is made explicit.
void check_resume_options(const TrainCorpora& train, const TrainOptions& options,
                          const TrainState& s) {
  TFM_REQUIRE(train.max_tokens() == s.options.max_tokens,
              "--max-tokens {} packs other batches than the checkpoint's {}: resume with "
              "--max-tokens {}",
              train.max_tokens(), s.options.max_tokens, s.options.max_tokens);
  for (const char* key : kTrajectoryKeys)
    if (options.get(key) != s.options.get(key))
      log::warn("resuming with --{} {} where the checkpoint has {}: the run will not continue "
                "exactly as it would have",
                key, options.get(key), s.options.get(key));
}

// What a fine-tuned run starts from (--init): a model's parameters and
// architecture, with or without training state (never read), and the
// model the run trains: the checkpoint's with the training knobs given.
struct Init {
  Init(const std::string& path, const Overrides& o)
      : file(path), config(fine_tuned_model(file.config(), o, file.path())) {}
  ModelFile file;  // checked as a model first
  ModelConfig config;
};

std::optional<Init> read_init(const TrainRequest& req) {
  if (req.init.empty()) return std::nullopt;
  TFM_REQUIRE(req.resume.empty(),
              "--init {} starts a new run and --resume {} continues one: give one of them",
              req.init, req.resume);
  return std::optional<Init>(std::in_place, req.init, req.overrides);
}

// The corpora given, in order, and their weights, against the ones the
// checkpoint trained on; then the batches an epoch draws.
void check_corpus(const TrainCorpora& train, const std::vector<double>& weights, const Resumed& r) {
  const std::vector<CorpusIdentity> want = r.state.corpora();
  TFM_REQUIRE(train.count() == want.size(),
              "corpus mismatch: {} was trained on {} {}, {} given: resume with the same "
              "corpora, in the same order",
              r.path(), want.size(), want.size() == 1 ? "corpus" : "corpora", train.count());
  for (size_t c = 0; c < want.size(); ++c) {
    const CorpusIdentity have = train[c].identity();
    TFM_REQUIRE(have == want[c],
                "corpus mismatch: {} was trained on another corpus ({}) than {} ({}){}", r.path(),
                want[c].str(), train[c].path(), have.str(),
                want.size() == 1 ? "" : fmt::format(" as its corpus {} of {}", c + 1, want.size()));
  }
  const std::string had = weights_text(r.state.weights()), asked = weights_text(weights);
  TFM_REQUIRE(had == asked,
              "weights mismatch: {} was trained with --weights {}, not {}: resume with --weights {} "
              "(other weights make another run: start it with --init)",
              r.path(), had, asked, had);
  const int64_t batches = epoch_batches(train.sizes(), weights);
  TFM_REQUIRE(batches == r.state.batches, "{}: the checkpoint's epochs have {} batches, {} {}",
              r.path(), r.state.batches, want.size() == 1 ? train.first().path() : "the corpora given",
              want.size() == 1 && weights[0] == 1 ? fmt::format("packs {}", batches)
                                                  : fmt::format("draw {}", batches));
}

// ------------------------------------------------------------ the vocabulary
// The vocabulary every corpus must come from, and where it came from (for
// the messages).
struct Vocabulary {
  std::string origin, fingerprint;
  int64_t size = 0;
  std::string bytes;  // the SentencePiece model
};

void check_vocab(const std::string& fingerprint, const std::string& what, const std::string& want,
                 const std::string& origin) {
  TFM_REQUIRE(fingerprint == want,
              "vocabulary mismatch: {} was made with vocabulary {}, but {} is {}", what,
              printable(fingerprint), origin, want);
}

// The training corpora come from one vocabulary: each against the first.
void check_same_vocab(const TrainCorpora& train) {
  const BatchSource& first = train.first();
  for (size_t c = 1; c < train.count(); ++c)
    TFM_REQUIRE(train[c].meta().fingerprint == first.meta().fingerprint,
                "vocabulary mismatch: {} was made with vocabulary {}, but {} with {}: the training "
                "corpora must share one vocabulary",
                train[c].path(), printable(train[c].meta().fingerprint), first.path(),
                printable(first.meta().fingerprint));
}

// A corpus and the vocabulary it must come from: the fingerprint, and the
// size its header gives (which sizes the model).
void check_corpus_vocab(const BatchSource& corpus, const Vocabulary& v) {
  check_vocab(corpus.meta().fingerprint, corpus.path(), v.fingerprint, v.origin);
  TFM_REQUIRE(corpus.meta().vocab_size == v.size,
              "vocabulary mismatch: {} says its vocabulary ({}) has {} pieces, but {} has {}",
              corpus.path(), printable(corpus.meta().fingerprint), corpus.meta().vocab_size,
              v.origin, v.size);
}

// The tokenizer embedded in every checkpoint: the checkpoint's own when
// resuming or fine-tuning (`model`), otherwise --vocab; its fingerprint
// must be the training corpus's. A checkpoint that embeds none (a
// converted model) and no --vocab: the corpus is taken as made with the
// model's vocabulary when its vocabulary has the model's size, and the
// run's checkpoints embed none either.
Vocabulary read_vocab(const TrainRequest& req, const ModelFile* model, const TrainCorpora& corpora) {
  const BatchSource& train = corpora.first();
  Vocabulary v;
  std::optional<Vocab> given;
  if (!req.vocab.empty()) given = Vocab::load(req.vocab);
  const Vocab* vocab = given ? &*given : nullptr;
  if (model && model->vocab()) {
    v.origin = model->path() + " (its embedded vocabulary)";
    if (given) check_vocab(given->fingerprint(), req.vocab, model->vocab()->fingerprint(), v.origin);
    vocab = model->vocab();
  }
  if (!vocab && model) {
    const int64_t size = model->config().vocab_size;
    TFM_REQUIRE(train.meta().vocab_size == size,
                "vocabulary mismatch: {} embeds no vocabulary, and {} was made with one of {} "
                "pieces ({}), not the model's {}",
                model->path(), train.path(), train.meta().vocab_size, train.meta().fingerprint, size);
    log::warn("{} embeds no vocabulary: {} is taken as made with the model's (both have {} "
              "pieces); give -m SPM.model to check it and to embed it in the checkpoints",
              model->path(), train.path(), size);
    return {train.path(), train.meta().fingerprint, size, {}};
  }
  TFM_REQUIRE(vocab,
              "tfm-train needs the vocabulary {} was made with: -m/--vocab SPM.model (a .tfmb "
              "records only its fingerprint, {})",
              train.path(), train.meta().fingerprint);
  if (v.origin.empty()) v.origin = req.vocab;
  v.fingerprint = vocab->fingerprint();
  v.size = vocab->size();
  for (size_t c = 0; c < corpora.count(); ++c) check_corpus_vocab(corpora[c], v);
  v.bytes = vocab->bytes();
  return v;
}

// The options, the corpora and the vocabulary they come from. `model`:
// the checkpoint resumed or fine-tuned, if any.
void open_corpora(Run& run, const TrainRequest& req, const std::optional<Resumed>& resumed,
                  const ModelFile* model) {
  run.options = with_overrides(resumed ? resumed->state.options : TrainOptions{}, req.overrides);
  run.train = std::make_unique<TrainCorpora>(req.train, run.options.max_tokens);
  if (resumed) check_resume_options(*run.train, run.options, resumed->state);
  run.options.max_tokens = run.train->max_tokens();  // 0 ("as packed") made explicit
  if (run.options.weights.empty()) run.options.weights.assign(run.train->count(), 1.0);
  run.options.schedule(1);  // a schedule short of what it needs: said before any training
  check_same_vocab(*run.train);
  const Vocabulary vocab = read_vocab(req, model, *run.train);
  run.vocab_fingerprint = vocab.fingerprint;
  run.tokenizer = vocab.bytes;
  if (!req.dev.empty()) {
    run.dev = std::make_unique<BatchSource>(req.dev, run.options.max_tokens);
    check_corpus_vocab(*run.dev, vocab);
  }
}

// ------------------------------------------------------------ the model
Device run_device(const TrainRequest& req, const dist::Comm& comm) {
  const Device device = select_device(parse_device(req.device));
  if (!comm.distributed() || !device.is_cuda()) return device;
  // One GPU a process: a rank takes the GPU of its rank on its machine.
  TFM_REQUIRE(req.device == "auto" || req.device == "cuda",
              "--device {} names one GPU for every rank; with several processes give --device "
              "cuda (or auto): each rank takes cuda:LOCAL_RANK (CUDA_VISIBLE_DEVICES picks which)",
              req.device);
  return Device::cuda(comm.local_rank());
}

// The model planned for the longest sentence and the largest batch of
// every corpus, and Adam over its optimizer state.
void make_model(Run& run) {
  std::vector<const BatchSource*> sources = run.train->sources();
  if (run.dev) sources.push_back(run.dev.get());
  for (size_t c = 0; c < run.train->count(); ++c) (*run.train)[c].frame_for(run.config);
  if (run.dev) run.dev->frame_for(run.config);
  const ModelLimits limits = limits_for(sources);
  TFM_REQUIRE(limits.max_len <= run.config.max_positions,
              "the corpus holds a sentence of {} tokens (eos included), over the {} positions "
              "the model has (--max-positions)",
              limits.max_len, run.config.max_positions);
  try {
    run.model = std::make_unique<Transformer>(run.config, limits, run.device,
                                              compute_dtype(run.precision));
  } catch (const Error& e) {
    if (std::string_view(e.what()).find("out of memory") == std::string_view::npos) throw;
    fail("{}: lower --max-tokens (batches of up to {} tokens a side now; --update-freq keeps "
         "the tokens per update) or the model (--d-model, --d-ff, --layers)",
         e.what(), limits.max_tokens);
  }
  const auto [m, v] = run.model->optimizer_state();
  run.adam = std::make_unique<Adam>(m, v, run.options.adam());
}

// ------------------------------------------------------------ the directory
std::string output_dir(const TrainRequest& req, const std::string& resume_path) {
  if (!req.output.empty()) return req.output;
  TFM_REQUIRE(!resume_path.empty(), "give the checkpoint directory: -o DIR");
  const std::string parent = std::filesystem::path(resume_path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// The checkpoint directory (checkpoint_dir.h): locked for this run,
// refused when it holds another run, or a later part of the one resumed (a
// checkpoint past the one resumed, whichever file says so: continuing
// would overwrite it, and --keep-last delete older ones).
std::unique_ptr<CheckpointDir> open_run_dir(const TrainRequest& req,
                                            const std::optional<Resumed>& resumed) {
  auto dir = std::make_unique<CheckpointDir>(output_dir(req, resumed ? resumed->path() : ""));
  const bool here = resumed && same_directory(resumed->path(), dir->dir());
  if (!here && dir->has_last())
    fail("{} already holds a run ({}): resume it with --resume {}, or train into another -o",
         dir->dir(), dir->last(), dir->dir());
  if (!here && dir->holds_run())
    fail("{} already holds checkpoints of a run (no checkpoint_last.bin): resume one with "
         "--resume {}/checkpoint_N.bin, or train into another -o",
         dir->dir(), dir->dir());
  if (!here) return dir;
  const int64_t step = resumed->state.step;
  const CheckpointDir::Newest newest = dir->newest();
  if (newest.step > step)
    fail("{} holds the run up to update {} ({}), past update {} of {}: continuing here would "
         "overwrite its later checkpoints; resume from {} to continue the run, or branch from "
         "update {} into another -o DIR",
         dir->dir(), newest.step, newest.path, step, resumed->path(), newest.path, step);
  // Killed between writing checkpoint_last.bin and copying it to its
  // numbered name: the copy is made now.
  std::error_code ec;
  if (std::filesystem::equivalent(resumed->path(), dir->last(), ec) &&
      !std::filesystem::exists(dir->numbered(step), ec))
    dir->commit(step, 0);
  return dir;
}

// ------------------------------------------------------------ the state
// The best so far is the resumed run's: beside the checkpoint resumed
// (which need not be in -o), when the one there is still that best; ""
// when none is.
std::string resumed_best(const std::string& resume_path, const TrainState& st) {
  const std::string best =
      (std::filesystem::path(resume_path).parent_path() / "checkpoint_best.bin").string();
  auto is_the_best = [&] {
    try {
      return read_state(io::CheckpointReader(best)).step == st.best_step;
    } catch (const Error&) {
      return false;  // damaged or not a checkpoint: not named as the best
    }
  };
  return st.best_dev_nll && std::filesystem::exists(best) && is_the_best() ? best : "";
}

void continue_from(Run& run, const Resumed& resumed) {
  load_checkpoint(resumed.file, *run.model);
  run.state = resumed.state;
  run.state.options = run.options;
  run.scaler.restore(run.state.loss_scale, run.state.loss_scale_streak);
  run.resumed_ranks = run.state.ranks;
  run.best_checkpoint = resumed_best(run.resume_path, run.state);
}

// Fine-tuning: the checkpoint's parameters, read through a model of its
// own configuration (the run's may have another dropout or label
// smoothing, never another layout) and copied whole, the gaps between
// tensors zero as after init().
void load_init_parameters(const ModelFile& file, Transformer& model) {
  ModelWeights staging(file.config(), Device::cpu());
  const TensorView p = staging.params();
  device_memset_zero(p.data(), p.device(), p.bytes(), staging.stream());
  file.load_parameters(staging);
  TFM_REQUIRE(staging.layout().total() == model.layout().total(),
              "{}: its parameters do not fit the model being fine-tuned", file.path());
  copy(model.params(), p, model.stream());
  model.stream().synchronize();
}

// A new run: initialized from its seed, or from the checkpoint it fine-tunes.
void start_new(Run& run, const ModelFile* init) {
  if (init)
    load_init_parameters(*init, *run.model);
  else
    run.model->init(run.options.seed);
  const std::vector<CorpusIdentity> corpora = run.train->identities();
  run.state.corpus = corpora.front();
  run.state.more_corpora.assign(corpora.begin() + 1, corpora.end());
  run.state.batches = epoch_batches(run.train->sizes(), run.options.weights);
  run.state.options = run.options;
  run.state.loss_scale = run.scaler.scale();
}

}  // namespace

TrainOptions with_overrides(TrainOptions base, const Overrides& overrides) {
  for (const auto& [key, value] : overrides.train) base.set(key, value);
  return base;
}

Run set_up(const TrainRequest& req, const dist::Comm& comm) {
  Run run;
  const std::optional<Init> init = read_init(req);
  const std::optional<Resumed> resumed = read_resumed(req);
  if (resumed) run.resume_path = resumed->path();
  if (init) run.init_path = init->file.path();
  const ModelFile* model = resumed ? &resumed->file : init ? &init->file : nullptr;
  open_corpora(run, req, resumed, model);

  run.config = resumed ? resumed->file.config() : init ? init->config : requested_model(req.overrides);
  const BatchSource& first = run.train->first();
  if (!model) run.config.vocab_size = first.meta().vocab_size;
  TFM_REQUIRE(run.config.vocab_size == first.meta().vocab_size,
              "vocabulary mismatch: {} holds ids of a vocabulary of {}, the model has {}",
              first.path(), first.meta().vocab_size, run.config.vocab_size);
  if (resumed) check_corpus(*run.train, run.options.weights, *resumed);
  TFM_REQUIRE(run.options.weights.size() == run.train->count(),
              "--weights gives {} factors for {} training corpora: give one for each",
              run.options.weights.size(), run.train->count());
  TFM_REQUIRE(epoch_batches(run.train->sizes(), run.options.weights) > 0,
              "--weights {} draw no batch an epoch from the corpora given: raise them",
              weights_text(run.options.weights));

  run.device = run_device(req, comm);
  run.precision = kTrainPrecision.resolve(run.options.precision, run.device);
  make_model(run);

  if (speaks(comm)) run.dir = open_run_dir(req, resumed);
  if (!req.log.empty() && speaks(comm)) run.log = std::make_unique<JsonLog>(req.log);

  run.scaler = LossScaler(run.precision == Precision::fp16);
  if (resumed)
    continue_from(run, *resumed);
  else
    start_new(run, init ? &init->file : nullptr);
  run.state.ranks = comm.size();
  return run;
}

// --dump-config (trainer.h): the configuration set_up() would resolve.
std::string dump_config(const TrainRequest& req) {
  if (const std::optional<Init> init = read_init(req))
    return config_file_text(init->config, with_overrides(TrainOptions{}, req.overrides), req.init);
  if (req.resume.empty())
    return config_file_text(requested_model(req.overrides),
                            with_overrides(TrainOptions{}, req.overrides));
  const ModelFile file(CheckpointDir::resume_path(req.resume));
  check_model_overrides(file.config(), req.overrides, file.path());
  return config_file_text(file.config(), with_overrides(read_state(file.reader()).options, req.overrides));
}

}  // namespace tfm::train
