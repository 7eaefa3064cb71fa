#include "libcore/train/trainer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "libcore/data/vocab.h"
#include "libcore/dist/comm.h"
#include "libcore/error.h"
#include "libcore/log.h"
#include "libcore/io/checkpoint.h"
#include "libcore/memory.h"
#include "libcore/model/model_io.h"
#include "libcore/process.h"
#include "libcore/train/checkpoint_dir.h"
#include "libcore/train/data.h"
#include "libcore/train/data_parallel.h"
#include "libcore/train/progress.h"
#include "libcore/train/state.h"
#include "libcore/train/step.h"

namespace tfm::train {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_stop_signal{0};

extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig); }

// The options that change what a resumed run computes: changing one on
// resume is allowed, but the run no longer continues exactly.
constexpr const char* kTrajectoryKeys[] = {"lr-scale", "warmup", "update-freq", "seed",
                                           "clip-norm", "precision"};

TrainOptions apply(TrainOptions options, const Overrides& o) {
  for (const auto& [key, value] : o.train) options.set(key, value);
  return options;
}

// Whether `file` lies in directory `dir`.
bool same_directory(const std::string& file, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path parent = fs::path(file).parent_path();
  return fs::equivalent(parent.empty() ? fs::path(".") : parent, dir, ec);
}

DType compute_dtype(Precision p) {
  switch (p) {
    case Precision::bf16: return DType::bf16;
    case Precision::fp16: return DType::f16;
    default: return DType::f32;
  }
}

// "63.1M", "45.2K", "900"
std::string format_count(int64_t n) {
  const double x = static_cast<double>(n);
  return n >= 1000000 ? fmt::format("{:.1f}M", x / 1e6)
         : n >= 1000  ? fmt::format("{:.1f}K", x / 1e3)
                      : fmt::format("{}", n);
}

std::string stop_reason_text(StopReason r) {
  switch (r) {
    case StopReason::max_steps: return "--max-steps reached";
    case StopReason::max_epochs: return "--max-epochs reached";
    case StopReason::max_time: return "--max-time reached";
    case StopReason::early_stop: return "early stop: the dev perplexity stopped improving";
    case StopReason::interrupted: return "interrupted";
  }
  return "?";
}

// What a window of updates between two reports adds up to.
struct Window {
  double loss = 0, nll = 0, grad_norm = 0;
  int64_t tokens = 0, updates = 0;
  Clock::time_point start = Clock::now();
};

// Whether this process speaks for the run: rank 0 (or the only process)
// prints, logs and writes the checkpoints; the other ranks say only errors.
bool speaks() { return dist::Comm::world().rank() == 0; }

class Trainer {
 public:
  explicit Trainer(const TrainRequest& request)
      : req_(request), comm_(dist::Comm::world()),
        progress_(request.quiet || !speaks() ? Progress::Mode::quiet : Progress::mode_for(false)) {
    if (comm_.rank() > 0) {
      log::set_program(fmt::format("tfm-train (rank {})", comm_.rank()));
      log::set_level(log::Level::error);  // rank 0 says what every rank would
    }
  }

  TrainResult run() {
    setup_ranks();
    try {
      return loop();
    } catch (const Error& e) {
      // A rank that fails alone stops the others at once, not at their timeout.
      if (!comm_.distributed()) throw;
      comm_.abort(e.where().empty() ? e.what() : fmt::format("{} ({})", e.what(), e.where()));
    }
  }

 private:
  // ------------------------------------------------------------- the ranks
  // Several processes (data_parallel.h): each sets up alone, then all show
  // each other what they set up, and start only when they agree on the
  // model, the options, the corpora, the vocabulary and the checkpoint. A
  // rank's setup error is told once, by rank 0, and every rank exits 1.
  void setup_ranks() {
    if (!comm_.distributed()) return setup();
    comm_.set_timeout(apply(TrainOptions{}, req_.overrides).dist_timeout);
    std::string mine;
    try {
      setup();
      mine = run_description();
    } catch (const Error& e) {
      mine = fmt::format("error = {}{}", e.what(), e.where().empty() ? "" : fmt::format(" ({})", e.where()));
    }
    const std::vector<std::string> all = comm_.all_gather(mine, "the ranks' setup");
    std::string failures;
    for (size_t r = 0; r < all.size(); ++r)
      if (all[r].starts_with("error = "))
        failures += fmt::format("{}rank {}: {}", failures.empty() ? "" : "; ", r, all[r].substr(8));
    if (!failures.empty()) fail_ranks(failures);
    for (size_t r = 1; r < all.size(); ++r)
      if (all[r] != all[0]) fail_ranks(first_difference(all[0], all[r], static_cast<int>(r)));
    comm_.set_timeout(opt_.dist_timeout);
    reducer_ = std::make_unique<GradientReducer>(comm_, *model_, static_cast<size_t>(opt_.bucket_mb) << 20);
  }

  // Rank 0 says it; the others exit 1 without a line.
  [[noreturn]] void fail_ranks(const std::string& why) const {
    if (comm_.rank() == 0) fail("{}", why);
    throw ReportedError(why);
  }

  // What the ranks must agree on, one "key = value" line each.
  std::string run_description() const {
    std::string d = fmt::format("tfm = {}\ndevice = {}\nprecision = {}\n", version_string(),
                                device_.is_cuda() ? "cuda" : "cpu", precision_name(precision_));
    d += fmt::format("corpus = {}\ndev = {}\nvocabulary = {}\n", train_->identity().str(),
                     dev_ ? dev_->identity().str() : "none", vocab_fingerprint_);
    d += fmt::format("checkpoint = {}\n",
                     resume_path_.empty() ? "none"
                                          : fmt::format("{} at update {}",
                                                        std::filesystem::absolute(resume_path_).string(),
                                                        st_.step));
    return d + config_file_text(config_, opt_);
  }

  static std::string first_difference(const std::string& zero, const std::string& other, int rank) {
    const auto lines = [](const std::string& t) {
      std::vector<std::string> out;
      size_t at = 0;
      while (at < t.size()) {
        const size_t end = std::min(t.find('\n', at), t.size());
        out.push_back(t.substr(at, end - at));
        at = end + 1;
      }
      return out;
    };
    const std::vector<std::string> a = lines(zero), b = lines(other);
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      const std::string x = i < a.size() ? a[i] : "(nothing)", y = i < b.size() ? b[i] : "(nothing)";
      if (x != y)
        return fmt::format("rank {} differs from rank 0: it has {} where rank 0 has {}", rank, y, x);
    }
    return fmt::format("rank {} differs from rank 0", rank);
  }

  // ------------------------------------------------------------------ setup
  void setup() {
    std::optional<TrainState> resumed;
    ModelConfig resumed_config;
    if (!req_.resume.empty()) {
      resume_path_ = CheckpointDir::resume_path(req_.resume);
      resumed_config = read_model_config(resume_path_);  // the checkpoint checked as a model first
      resumed = read_state(resume_path_);
      check_model_overrides(resumed_config, req_.overrides, resume_path_);
    }
    opt_ = apply(resumed ? resumed->options : TrainOptions{}, req_.overrides);

    train_ = std::make_unique<BatchSource>(req_.train, opt_.max_tokens);
    if (resumed) check_resume_options(*resumed);
    opt_.max_tokens = train_->max_tokens();  // 0 ("as packed") made explicit
    setup_vocab(resumed.has_value());
    if (!req_.dev.empty()) {
      dev_ = std::make_unique<BatchSource>(req_.dev, opt_.max_tokens);
      check_corpus_vocab(*dev_, req_.dev);
    }

    config_ = resumed ? resumed_config : requested_model(req_.overrides);
    if (!resumed) config_.vocab_size = train_->meta().vocab_size;
    TFM_REQUIRE(config_.vocab_size == train_->meta().vocab_size,
                "vocabulary mismatch: {} holds ids of a vocabulary of {}, the model has {}",
                req_.train, train_->meta().vocab_size, config_.vocab_size);
    if (resumed) check_corpus(*resumed);

    device_ = select_device(parse_device(req_.device));
    if (comm_.distributed() && device_.is_cuda()) {
      // One GPU a process: a rank takes the GPU of its rank on its machine.
      TFM_REQUIRE(req_.device == "auto" || req_.device == "cuda",
                  "--device {} names one GPU for every rank; with several processes give --device "
                  "cuda (or auto): each rank takes cuda:LOCAL_RANK (CUDA_VISIBLE_DEVICES picks which)",
                  req_.device);
      device_ = Device::cuda(comm_.local_rank());
    }
    precision_ = resolve_precision(opt_.precision, device_.is_cuda());
    TFM_REQUIRE(device_.is_cuda() || precision_ == Precision::fp32,
                "--precision {} computes on a GPU only; on the CPU tfm trains in fp32 (use "
                "--precision fp32 or auto, or --device cuda where a GPU is usable)",
                precision_name(precision_));
    make_model();

    if (speaks()) open_run_dir(resumed);
    if (!req_.log.empty() && speaks()) log_ = std::make_unique<JsonLog>(req_.log);

    scaler_ = std::make_unique<LossScaler>(precision_ == Precision::fp16);
    if (resumed) {
      load_checkpoint(resume_path_, *model_);
      st_ = *resumed;
      st_.options = opt_;
      scaler_->restore(st_.loss_scale, st_.loss_scale_streak);
      saved_step_ = st_.step;
      last_checkpoint_ = resume_path_;
      resumed_ranks_ = st_.ranks;
      // The best so far is the resumed run's: beside the checkpoint resumed
      // (which need not be in -o), when the one there is still that best.
      const std::string best =
          (std::filesystem::path(resume_path_).parent_path() / "checkpoint_best.bin").string();
      auto is_the_best = [&] {
        try {
          return read_state(best).step == st_.best_step;
        } catch (const Error&) {
          return false;  // damaged or not a checkpoint: not named as the best
        }
      };
      if (st_.best_dev_nll && std::filesystem::exists(best) && is_the_best()) best_checkpoint_ = best;
    } else {
      model_->init(opt_.seed);
      st_.corpus = train_->identity();
      st_.batches = static_cast<int64_t>(train_->size());
      st_.options = opt_;
      st_.loss_scale = scaler_->scale();
    }
    st_.ranks = comm_.size();
    order_ = epoch_order(train_->size(), opt_.seed, st_.epoch);
    describe(resumed.has_value());
  }

  // The checkpoint directory (rank 0's alone; checkpoint_dir.h): locked
  // for this run, refused when it holds another run, or a later part of the
  // one resumed (a checkpoint past the one resumed, whichever file says so:
  // continuing would overwrite it, and --keep-last delete older ones).
  void open_run_dir(const std::optional<TrainState>& resumed) {
    dir_ = std::make_unique<CheckpointDir>(output_dir());
    const bool here = resumed && same_directory(resume_path_, dir_->dir());
    if (!here && dir_->has_last())
      fail("{} already holds a run ({}): resume it with --resume {}, or train into another -o",
           dir_->dir(), dir_->last(), dir_->dir());
    if (!here && dir_->holds_run())
      fail("{} already holds checkpoints of a run (no checkpoint_last.bin): resume one with "
           "--resume {}/checkpoint_N.bin, or train into another -o",
           dir_->dir(), dir_->dir());
    if (!here) return;
    const CheckpointDir::Newest newest = dir_->newest();
    if (newest.step > resumed->step)
      fail("{} holds the run up to update {} ({}), past update {} of {}: continuing here would "
           "overwrite its later checkpoints; resume from {} to continue the run, or branch from "
           "update {} into another -o DIR",
           dir_->dir(), newest.step, newest.path, resumed->step, resume_path_, newest.path,
           resumed->step);
    // Killed between writing checkpoint_last.bin and copying it to its
    // numbered name: the copy is made now.
    std::error_code ec;
    if (std::filesystem::equivalent(resume_path_, dir_->last(), ec) &&
        !std::filesystem::exists(dir_->numbered(resumed->step), ec))
      dir_->commit(resumed->step, 0);
  }

  void check_resume_options(const TrainState& s) {
    const BatchSource& t = *train_;
    TFM_REQUIRE(t.max_tokens() == s.options.max_tokens,
                "--max-tokens {} packs other batches than the checkpoint's {}: resume with "
                "--max-tokens {}",
                t.max_tokens(), s.options.max_tokens, s.options.max_tokens);
    for (const char* key : kTrajectoryKeys)
      if (opt_.get(key) != s.options.get(key))
        log::warn("resuming with --{} {} where the checkpoint has {}: the run will not continue "
                  "exactly as it would have",
                  key, opt_.get(key), s.options.get(key));
  }

  void check_corpus(const TrainState& s) {
    const CorpusIdentity have = train_->identity();
    TFM_REQUIRE(have == s.corpus,
                "corpus mismatch: {} was trained on another corpus ({}) than {} ({})",
                resume_path_, s.corpus.str(), req_.train, have.str());
    TFM_REQUIRE(static_cast<int64_t>(train_->size()) == s.batches,
                "{}: the checkpoint's epochs have {} batches, {} packs {}", resume_path_,
                s.batches, req_.train, train_->size());
  }

  static void check_vocab(const std::string& fingerprint, const std::string& what,
                          const std::string& want, const std::string& origin) {
    TFM_REQUIRE(fingerprint == want,
                "vocabulary mismatch: {} was made with vocabulary {}, but {} is {}", what,
                printable(fingerprint), origin, want);
  }

  // A corpus and the vocabulary it must come from: the fingerprint, and the
  // size its header gives (which sizes the model).
  void check_corpus_vocab(const BatchSource& corpus, const std::string& what) const {
    check_vocab(corpus.meta().fingerprint, what, vocab_fingerprint_, vocab_origin_);
    TFM_REQUIRE(corpus.meta().vocab_size == vocab_size_,
                "vocabulary mismatch: {} says its vocabulary ({}) has {} pieces, but {} has {}",
                what, printable(corpus.meta().fingerprint), corpus.meta().vocab_size,
                vocab_origin_, vocab_size_);
  }

  // The tokenizer embedded in every checkpoint: the checkpoint's own when
  // resuming, otherwise --vocab; its fingerprint must be the corpus's.
  void setup_vocab(bool resuming) {
    std::optional<Vocab> given;
    if (!req_.vocab.empty()) given = Vocab::load(req_.vocab);
    if (resuming) {
      std::string bytes = io::read_checkpoint_tokenizer(resume_path_);
      if (!bytes.empty()) {
        const Vocab embedded = Vocab::from_bytes(std::move(bytes), resume_path_);
        if (given)
          check_vocab(given->fingerprint(), req_.vocab, embedded.fingerprint(),
                      resume_path_ + " (its embedded vocabulary)");
        given.emplace(Vocab::from_bytes(embedded.bytes(), resume_path_));
        vocab_origin_ = resume_path_ + " (its embedded vocabulary)";
      }
    }
    TFM_REQUIRE(given.has_value(),
                "tfm-train needs the vocabulary {} was made with: -m/--vocab SPM.model (a .tfmb "
                "records only its fingerprint, {})",
                req_.train, train_->meta().fingerprint);
    if (vocab_origin_.empty()) vocab_origin_ = req_.vocab;
    vocab_fingerprint_ = given->fingerprint();
    vocab_size_ = given->size();
    check_corpus_vocab(*train_, req_.train);
    tokenizer_ = given->bytes();
  }

  void make_model() {
    ModelLimits limits = dev_ ? limits_for({train_.get(), dev_.get()}) : train_->limits();
    TFM_REQUIRE(limits.max_len <= config_.max_positions,
                "the corpus holds a sentence of {} tokens (eos included), over the {} positions "
                "the model has (--max-positions)",
                limits.max_len, config_.max_positions);
    try {
      model_ = std::make_unique<Transformer>(config_, limits, device_, compute_dtype(precision_));
    } catch (const Error& e) {
      if (std::string_view(e.what()).find("out of memory") == std::string_view::npos) throw;
      fail("{}: lower --max-tokens (batches of up to {} tokens a side now; --update-freq keeps "
           "the tokens per update) or the model (--d-model, --d-ff, --layers)",
           e.what(), limits.max_tokens);
    }
    const auto [m, v] = model_->optimizer_state();
    adam_ = std::make_unique<Adam>(m, v);
  }

  std::string output_dir() const {
    if (!req_.output.empty()) return req_.output;
    TFM_REQUIRE(!resume_path_.empty(), "give the checkpoint directory: -o DIR");
    const std::string parent = std::filesystem::path(resume_path_).parent_path().string();
    return parent.empty() ? "." : parent;
  }

  void describe(bool resumed) {
    progress_.line(fmt::format(
        "model: {} layers, d_model {}, d_ff {}, {} heads, vocabulary {}: {} parameters, on {} in "
        "{}",
        config_.layers, config_.d_model, config_.d_ff, config_.heads, config_.vocab_size,
        format_count(config_.parameter_count()), device_.str(), precision_name(precision_)));
    progress_.line(fmt::format("memory: {}", model_->memory_report()));
    progress_.line(fmt::format("{}: {} pairs in {} batches of <= {} tokens a side; {}{} batch{} an "
                               "update",
                               req_.train, train_->pairs(), train_->size(), train_->max_tokens(),
                               comm_.distributed() ? fmt::format("{} ranks x ", comm_.size()) : "",
                               opt_.update_freq, opt_.update_freq == 1 ? "" : "es"));
    if (dev_)
      progress_.line(fmt::format("{}: {} pairs in {} batches, validated every {} updates",
                                 req_.dev, dev_->pairs(), dev_->size(), opt_.valid_every));
    if (resumed)
      progress_.line(fmt::format("resumed from {}: update {}, epoch {}, batch {} of {}",
                                 resume_path_, st_.step, st_.epoch, st_.cursor, st_.batches));
    if (resumed && resumed_ranks_ != comm_.size())
      progress_.line(fmt::format(
          "the run had {} rank{}, this one has {}: an update takes {} x {} batches now, {} x {} before "
          "(the data cursor is global: no batch is repeated or skipped)",
          resumed_ranks_, resumed_ranks_ == 1 ? "" : "s", comm_.size(), comm_.size(), opt_.update_freq,
          resumed_ranks_, opt_.update_freq));
    JsonWriter j;
    j.begin_object().field("event", "start").field("step", st_.step).field("epoch", st_.epoch)
        .field("resumed_from", resume_path_).field("parameters", config_.parameter_count())
        .field("device", device_.str()).field("precision", precision_name(precision_))
        .field("ranks", comm_.size()).end_object();
    log(j);
  }

  // ------------------------------------------------------------------ loop
  // The host queues update n + 1 before it reads update n's sums, so the
  // device never waits for it (train/step.h). It reads first, and so runs
  // an update behind no longer, when what follows update n needs its
  // parameters or its outcome: a validation, a checkpoint, the last update,
  // or the fp16 loss scale of the next one.
  struct InFlight {
    QueuedUpdate update;
    StepConfig config;
    int64_t epoch;  // of the update's batches (st_.epoch may be past it when it is read)
  };

  TrainResult loop() {
    start_ = Clock::now();
    last_save_ = start_;
    window_ = Window{};
    elapsed_base_ = st_.elapsed;
    std::optional<StopReason> stop;
    std::optional<InFlight> flight;
    std::vector<HostBatch> batches;
    while (true) {
      if (flight && must_read_first()) {
        stop = finish(*flight, /*current=*/true);
        flight.reset();
        if (stop) break;
      }
      stop = stop_before_update(flight.has_value());
      if (comm_.distributed()) stop = agreed_stop(stop);
      if (stop) break;
      // The update's batches in the global order; this rank trains on its share.
      std::vector<size_t> ids;
      while (static_cast<int64_t>(ids.size()) < comm_.size() * opt_.update_freq && next_batch(ids)) {}
      if (ids.empty()) {
        stop = StopReason::max_epochs;
        break;
      }
      const Share share = share_of(ids.size(), comm_.rank(), comm_.size(), opt_.update_freq);
      batches.clear();
      for (size_t i = share.first; i < share.first + share.count; ++i) batches.push_back(train_->batch(ids[i]));
      StepConfig sc = step_config(flight.has_value());
      sc.rng_counter += static_cast<uint32_t>(share.first);
      for (size_t id : ids) sc.update_tokens += train_->target_tokens(id);
      const QueuedUpdate queued = queue_update(*model_, *adam_, batches, sc, scaler_->scale(), reducer_.get());
      st_.micro_batches += static_cast<int64_t>(ids.size());
      ++queued_;
      if (flight) stop = finish(*flight, /*current=*/false);
      flight = InFlight{queued, sc, st_.epoch};
      if (stop) break;
    }
    if (flight) {  // the last update queued: read it, and what follows it runs
      const std::optional<StopReason> last = finish(*flight, /*current=*/true);
      if (last) stop = last;
    }
    progress_.end_live();
    if (st_.step != saved_step_ || last_checkpoint_.empty()) save("end");
    const int sig = g_stop_signal.load();
    if (!speaks()) {
      // nothing to say: rank 0 tells the run's end
    } else if (*stop == StopReason::interrupted)
      progress_.line(fmt::format("interrupted by {} after update {}; checkpoint written to {} "
                                 "(resume with --resume {})",
                                 sig ? strsignal(sig) : "a signal", st_.step, last_checkpoint_,
                                 dir_->dir()));
    else
      progress_.line(fmt::format("done ({}): update {}, epoch {}, {} of training{}; checkpoint {}{}",
                                 stop_reason_text(*stop), st_.step, st_.epoch,
                                 format_eta(elapsed()), skipped_text(), last_checkpoint_,
                                 best_text()));
    JsonWriter j;
    j.begin_object().field("event", "stop").field("reason", stop_reason_text(*stop))
        .field("step", st_.step).field("epoch", st_.epoch).field("elapsed", elapsed())
        .field("checkpoint", last_checkpoint_).end_object();
    log(j);
    return {*stop, st_.step, last_checkpoint_};
  }

  // The next update's number and rate: one past the updates read, or, with
  // one still unread, one past it too, unless it is skipped (the retry).
  StepConfig step_config(bool one_unread) const {
    StepConfig sc;
    const auto lr = [&](int64_t step) {
      return noam_learning_rate(step, config_.d_model, opt_.warmup, opt_.lr_scale);
    };
    sc.step = st_.step + (one_unread ? 2 : 1);
    sc.lr = lr(sc.step);
    if (one_unread) {
      sc.retry_step = st_.step + 1;
      sc.retry_lr = lr(sc.retry_step);
    }
    sc.seed = opt_.seed;
    sc.rng_counter = static_cast<uint32_t>(st_.micro_batches);
    sc.clip_norm = opt_.clip_norm;
    sc.tf32 = precision_ == Precision::tf32;
    return sc;
  }

  // Whether the update in flight must be read before the next is queued:
  // if it is applied, it is update st_.step + 1, and what happens after
  // that update must see its parameters (not the next update's), or the
  // next update needs its fp16 outcome.
  bool must_read_first() const {
    const int64_t n = st_.step + 1;
    return scaler_->dynamic() || (dev_ && n % opt_.valid_every == 0) ||
           (opt_.save_every_steps > 0 && n % opt_.save_every_steps == 0) ||
           (opt_.max_steps > 0 && n >= opt_.max_steps) || save_due_by_time();
  }

  bool save_due_by_time() const {
    return speaks() && opt_.save_every > 0 &&
           std::chrono::duration<double>(Clock::now() - last_save_).count() >= opt_.save_every;
  }

  // Reads an update and does what follows it. current: no later update has
  // been queued, so the parameters are this update's and a validation or a
  // checkpoint may run (must_read_first() made sure that those tied to an
  // update number only fall on current updates).
  std::optional<StopReason> finish(const InFlight& f, bool current) {
    if (reducer_ && reducer_->on_gpu())
      comm_.wait_until([&] { return model_->update_arrived(f.update.ticket); }, "an update's sums",
                       [&] { return reducer_->health(); });
    const StepResult r = read_update(*model_, f.update, *scaler_);
    st_.loss_scale = scaler_->scale();
    st_.loss_scale_streak = scaler_->streak();
    if (r.outcome != StepOutcome::applied) {
      skipped(r, st_.step + 1);
      return std::nullopt;
    }
    ++st_.step;
    ++run_updates_;
    st_.consecutive_bad = 0;
    st_.tokens += r.sums.tokens;
    window_.loss += r.sums.loss;
    window_.nll += r.sums.nll;
    window_.tokens += r.sums.tokens;
    window_.grad_norm += r.grad_norm;
    ++window_.updates;
    report(st_.step == f.config.step ? f.config.lr : f.config.retry_lr, f.epoch);
    if (!current) return std::nullopt;
    std::optional<StopReason> stop;
    if (dev_ && st_.step % opt_.valid_every == 0 && validate()) stop = StopReason::early_stop;
    const bool by_steps = opt_.save_every_steps > 0 && st_.step % opt_.save_every_steps == 0;
    if (by_steps || save_due_by_time()) save(by_steps ? "every-steps" : "every-time");
    return stop;
  }

  // one_unread: an update is queued and not read (it cannot reach
  // --max-steps: must_read_first() reads that one at once).
  std::optional<StopReason> stop_before_update(bool one_unread) const {
    if (g_stop_signal.load() != 0) return StopReason::interrupted;
    if (opt_.max_steps > 0 && st_.step + (one_unread ? 1 : 0) >= opt_.max_steps)
      return StopReason::max_steps;
    if (opt_.max_time > 0 && elapsed() >= opt_.max_time) return StopReason::max_time;
    if (opt_.max_epochs > 0 && st_.epoch >= opt_.max_epochs &&
        st_.cursor >= static_cast<int64_t>(order_.size()))
      return StopReason::max_epochs;
    return std::nullopt;
  }

  // The next batch of the shuffled order, starting the next epoch at the
  // end of one; false after the last epoch (--max-epochs).
  bool next_batch(std::vector<size_t>& out) {
    if (st_.cursor >= static_cast<int64_t>(order_.size())) {
      if (opt_.max_epochs > 0 && st_.epoch >= opt_.max_epochs) return false;
      ++st_.epoch;
      st_.cursor = 0;
      order_ = epoch_order(train_->size(), opt_.seed, st_.epoch);
    }
    out.push_back(order_[static_cast<size_t>(st_.cursor++)]);
    return true;
  }

  // Several ranks stop together: at each update they agree (Comm::agree,
  // the heartbeat that names a rank gone) on the weightiest reason any has.
  // A signal or a rank's clock (--max-time) may come to one rank first; the
  // other limits fall alike on all.
  std::optional<StopReason> agreed_stop(std::optional<StopReason> mine) {
    static constexpr StopReason kByWeight[] = {StopReason::max_time, StopReason::interrupted,
                                               StopReason::max_steps, StopReason::max_epochs,
                                               StopReason::early_stop};
    int64_t code = 0;
    for (int64_t i = 0; i < 5; ++i)
      if (mine == kByWeight[i]) code = i + 1;
    const int64_t any = comm_.agree(queued_, code);
    if (any == 0) return std::nullopt;
    return kByWeight[any - 1];
  }

  // An update not applied; `step` is the number it would have had.
  void skipped(const StepResult& r, int64_t step) {
    const bool overflow = r.outcome == StepOutcome::overflow;
    JsonWriter j;
    j.begin_object().field("event", "skip").field("step", step)
        .field("reason", overflow ? "overflow" : "nan").field("loss", r.sums.loss)
        .field("grad_norm", r.grad_norm).field("loss_scale", scaler_->scale()).end_object();
    log(j);
    if (overflow) {
      ++st_.overflow_steps;
      log::debug("update {}: fp16 gradient overflow, skipped; loss scale now {}", step,
                 scaler_->scale());
      return;
    }
    ++st_.bad_steps;
    ++st_.consecutive_bad;
    progress_.end_live();
    log::warn("update {} skipped: the loss or the gradient is NaN or infinite (loss {}, gradient "
              "norm {}); {} in a row",
              step, r.sums.loss / std::max<double>(1, static_cast<double>(r.sums.tokens)),
              r.grad_norm, st_.consecutive_bad);
    if (st_.consecutive_bad >= opt_.max_bad_steps)
      fail("stopped after {} updates in a row with a NaN or infinite loss or gradient (lower "
           "--lr-scale, or set --clip-norm); {}",
           st_.consecutive_bad,
           last_checkpoint_.empty() ? "no checkpoint was written"
                                    : fmt::format("the last good checkpoint is {}", last_checkpoint_));
  }

  // ", best DIR/checkpoint_best.bin (dev ppl 5.123 at update 900)", or
  // nothing; the file named is one that exists (a run resumed from another
  // directory has its best there until it validates better).
  std::string best_text() const {
    if (!st_.best_dev_nll) return {};
    const std::string where = best_checkpoint_.empty() ? "dev ppl" : best_checkpoint_ + " (dev ppl";
    return fmt::format(", best {} {:.3f} at update {}{}", where, std::exp(*st_.best_dev_nll), st_.best_step,
                       best_checkpoint_.empty() ? "; its checkpoint is not kept" : ")");
  }

  // ", 2 updates skipped for NaN/inf, 7 for fp16 overflows", or nothing.
  std::string skipped_text() const {
    if (st_.bad_steps == 0 && st_.overflow_steps == 0) return {};
    return fmt::format(", {} updates skipped for NaN/inf, {} for fp16 overflows", st_.bad_steps,
                       st_.overflow_steps);
  }

  double elapsed() const {
    return elapsed_base_ + std::chrono::duration<double>(Clock::now() - start_).count();
  }

  // Resident memory on the CPU; on a GPU, the planned memory (nothing grows).
  size_t memory_bytes() const {
    return device_.is_cpu() ? resident_bytes() : model_->memory_bytes();
  }

  double eta() const {
    if (run_updates_ == 0) return -1;
    const double per_update =
        std::chrono::duration<double>(Clock::now() - start_).count() / static_cast<double>(run_updates_);
    double left = INFINITY;
    if (opt_.max_steps > 0) left = static_cast<double>(opt_.max_steps - st_.step) * per_update;
    if (opt_.max_time > 0) left = std::min(left, opt_.max_time - elapsed());
    return std::isfinite(left) ? left : -1;
  }

  // The live line after every update; a line and a log record every
  // --log-every updates, over the updates since the last one. `epoch`: the
  // update's own (the next one may have begun another when this is read).
  void report(double lr, int64_t epoch) {
    const bool periodic = st_.step % opt_.log_every == 0;
    if (!periodic && !progress_.live()) return;
    const Window& w = window_;
    const double tokens = std::max<double>(1, static_cast<double>(w.tokens));
    const double seconds = std::chrono::duration<double>(Clock::now() - w.start).count();
    const double tok_s = seconds > 0 ? static_cast<double>(w.tokens) / seconds : 0;
    const double loss = w.loss / tokens, nll = w.nll / tokens;
    const double gnorm = w.grad_norm / static_cast<double>(std::max<int64_t>(1, w.updates));
    std::string text = fmt::format(
        "update {} | epoch {} | loss {:.3f} | ppl {:.2f} | lr {:.3g} | gnorm {:.3f} | {:.0f} tok/s | "
        "mem {} | ETA {}",
        st_.step, epoch, loss, std::exp(nll), lr, gnorm, tok_s, format_bytes(memory_bytes()),
        format_eta(eta()));
    if (scaler_->dynamic())
      text += fmt::format(" | scale {} | overflows {}", scaler_->scale(), st_.overflow_steps);
    if (progress_.live()) progress_.status(text, periodic);
    if (!periodic) return;
    if (!progress_.live()) progress_.line(text);
    JsonWriter j;
    j.begin_object().field("event", "train").field("step", st_.step).field("epoch", epoch)
        .field("loss", w.loss / tokens).field("nll", nll).field("ppl", std::exp(nll))
        .field("lr", lr).field("grad_norm", gnorm).field("tokens", w.tokens)
        .field("tokens_per_s", tok_s).field("loss_scale", scaler_->scale())
        .field("overflow_steps", st_.overflow_steps).field("bad_steps", st_.bad_steps)
        .field("elapsed", elapsed()).field("memory_bytes", memory_bytes())
        .end_object();
    log(j);
    window_ = Window{};
  }

  // Dev loss and perplexity; keeps the best checkpoint. True when early
  // stopping says to stop.
  bool validate() {
    LossSums sum;
    // Rank r of K evaluates batches r, r + K, ...; the sums are the ranks'.
    for (size_t i = static_cast<size_t>(comm_.rank()); i < dev_->size(); i += static_cast<size_t>(comm_.size())) {
      const LossSums s = model_->evaluate(dev_->batch(i));
      sum.loss += s.loss;
      sum.nll += s.nll;
      sum.tokens += s.tokens;
    }
    if (comm_.distributed()) {
      double sums[] = {sum.loss, sum.nll, static_cast<double>(sum.tokens)};
      comm_.all_reduce_sum(sums, "the dev sums");
      sum = {sums[0], sums[1], static_cast<int64_t>(sums[2])};
    }
    const double tokens = static_cast<double>(std::max<int64_t>(1, sum.tokens));
    const double nll = sum.nll / tokens;
    const bool better = !st_.best_dev_nll || nll < *st_.best_dev_nll;
    if (better) {
      st_.best_dev_nll = nll;
      st_.best_step = st_.step;
      st_.stale_validations = 0;
    } else {
      ++st_.stale_validations;
    }
    progress_.line(fmt::format("update {}: dev loss {:.4f}, nll {:.4f}, ppl {:.3f}{}", st_.step,
                               sum.loss / tokens, nll, std::exp(nll),
                               better ? " (best)"
                                      : fmt::format(" (best {:.3f} at update {}; {} without better)",
                                                    std::exp(*st_.best_dev_nll), st_.best_step,
                                                    st_.stale_validations)));
    JsonWriter j;
    j.begin_object().field("event", "valid").field("step", st_.step).field("loss", sum.loss / tokens)
        .field("nll", nll).field("ppl", std::exp(nll)).field("tokens", sum.tokens)
        .field("best_ppl", std::exp(*st_.best_dev_nll)).field("best_step", st_.best_step)
        .end_object();
    log(j);
    if (better && speaks()) {
      write_checkpoint(dir_->best(), "best");
      best_checkpoint_ = dir_->best();
    }
    return opt_.early_stop > 0 && st_.stale_validations >= opt_.early_stop;
  }

  // Writes `file` (`path` unless given), logged as `path`.
  void write_checkpoint(const std::string& path, const char* why, const std::string& file = {}) {
    st_.elapsed = elapsed();
    save_checkpoint(file.empty() ? path : file, *model_, tokenizer_, st_);
    JsonWriter j;
    j.begin_object().field("event", "checkpoint").field("step", st_.step).field("path", path)
        .field("why", why).end_object();
    log(j);
  }

  void save(const char* why) {
    if (!speaks()) {  // rank 0 writes the run's checkpoints
      saved_step_ = st_.step;
      return;
    }
    // checkpoint_last.bin first, then its numbered name (checkpoint_dir.h):
    // a kill between the two never leaves a numbered checkpoint newer than it.
    const std::string path = dir_->numbered(st_.step);
    write_checkpoint(path, why, dir_->last());
    dir_->commit(st_.step, opt_.keep_last);
    saved_step_ = st_.step;
    last_checkpoint_ = path;
    last_save_ = Clock::now();
    log::debug("update {}: checkpoint {} ({})", st_.step, path, why);
  }

  void log(const JsonWriter& record) {
    if (log_) log_->write(record);
  }

  TrainRequest req_;
  dist::Comm& comm_;
  Progress progress_;
  std::string resume_path_, vocab_origin_, vocab_fingerprint_, tokenizer_;
  int64_t vocab_size_ = 0;
  TrainOptions opt_;
  ModelConfig config_;
  std::unique_ptr<BatchSource> train_, dev_;
  Device device_;
  Precision precision_ = Precision::fp32;  // --precision as resolved on device_
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<Adam> adam_;
  std::unique_ptr<LossScaler> scaler_;
  std::unique_ptr<CheckpointDir> dir_;
  std::unique_ptr<JsonLog> log_;
  std::unique_ptr<GradientReducer> reducer_;  // several ranks only
  int64_t queued_ = 0;         // updates queued in this run (the ranks' common count)
  int64_t resumed_ranks_ = 1;  // the ranks of the run resumed
  TrainState st_;
  std::vector<uint32_t> order_;
  Window window_;
  Clock::time_point start_, last_save_;
  double elapsed_base_ = 0;
  int64_t saved_step_ = -1, run_updates_ = 0;
  std::string last_checkpoint_;
  std::string best_checkpoint_;  // the best dev perplexity's checkpoint, or "" when none is kept
};

}  // namespace

std::string dump_config(const TrainRequest& req) {
  if (req.resume.empty())
    return config_file_text(requested_model(req.overrides), apply(TrainOptions{}, req.overrides));
  const std::string path = CheckpointDir::resume_path(req.resume);
  const ModelConfig config = read_model_config(path);
  check_model_overrides(config, req.overrides, path);
  return config_file_text(config, apply(read_state(path).options, req.overrides));
}

TrainResult train(const TrainRequest& request) { return Trainer(request).run(); }

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESETHAND;  // a second signal acts as usual
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace tfm::train
