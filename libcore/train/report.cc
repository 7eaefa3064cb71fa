#include "libcore/train/report.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "libcore/base/memory.h"

namespace tfm::train {
namespace {

// "63.1M", "45.2K", "900"
std::string format_count(int64_t n) {
  const double x = static_cast<double>(n);
  return n >= 1000000 ? fmt::format("{:.1f}M", x / 1e6)
         : n >= 1000  ? fmt::format("{:.1f}K", x / 1e3)
                      : fmt::format("{}", n);
}

// "1,234,567"
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
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

}  // namespace

Reporter::Reporter(const Run& run, bool quiet) : run_(run), progress_(Progress::mode_for(quiet)) {}

void Reporter::describe(int ranks, const std::vector<BatchRef>& order) {
  const ModelConfig& c = run_.config;
  const TrainState& st = run_.state;
  const TrainOptions& opt = run_.options;
  progress_.line(fmt::format(
      "model: {} layers, d_model {}, d_ff {}, {} heads, vocabulary {}: {} parameters, on {} in "
      "{}",
      c.encoder_layers == c.decoder_layers ? std::to_string(c.encoder_layers)
                                           : fmt::format("{} + {}", c.encoder_layers, c.decoder_layers),
      c.d_model, c.d_ff, c.heads, c.vocab_size, format_count(c.parameter_count()),
      run_.device.str(), precision_name(run_.precision)));
  progress_.line(fmt::format("memory: {}", run_.model->memory_report()));
  const TrainCorpora& corpora = *run_.train;
  for (size_t c = 0; c < corpora.count(); ++c) {
    const BatchSource& train = corpora[c];
    const double w = opt.weights.at(c);
    progress_.line(fmt::format("{}: {} pairs in {} batches of <= {} tokens a side{}; {}{} batch{} "
                               "an update",
                               train.path(), train.pairs(), train.size(), train.max_tokens(),
                               w == 1 ? "" : fmt::format(", weight {}", w),
                               ranks > 1 ? fmt::format("{} ranks x ", ranks) : "", opt.update_freq,
                               opt.update_freq == 1 ? "" : "es"));
  }
  if (run_.dev)
    progress_.line(fmt::format("{}: {} pairs in {} batches, validated every {} updates",
                               run_.dev->path(), run_.dev->pairs(), run_.dev->size(),
                               opt.valid_every));
  if (run_.resumed())
    progress_.line(fmt::format("resumed from {}: update {}, epoch {}, batch {} of {}",
                               run_.resume_path, st.step, st.epoch, st.cursor, st.batches));
  if (!run_.init_path.empty())
    progress_.line(fmt::format("fine-tuning {}: its parameters; a new optimizer, learning-rate "
                               "schedule and data order from update 0",
                               run_.init_path));
  const int64_t before = run_.resumed_ranks;
  if (run_.resumed() && before != ranks)
    progress_.line(fmt::format(
        "the run had {} rank{}, this one has {}: an update takes {} x {} batches now, {} x {} before "
        "(the data cursor is global: no batch is repeated or skipped)",
        before, before == 1 ? "" : "s", ranks, ranks, opt.update_freq, before, opt.update_freq));
  JsonWriter j;
  j.begin_object().field("event", "start").field("step", st.step).field("epoch", st.epoch)
      .field("resumed_from", run_.resume_path).field("init", run_.init_path)
      .field("parameters", c.parameter_count())
      .field("device", run_.device.str()).field("precision", precision_name(run_.precision))
      .field("ranks", ranks);
  progress_.line(drawn(st.epoch, order, j));
  j.end_object();
  log(j);
}

void Reporter::epoch(int64_t epoch, const std::vector<BatchRef>& order) {
  JsonWriter j;
  j.begin_object().field("event", "epoch").field("step", run_.state.step).field("epoch", epoch);
  progress_.line(drawn(epoch, order, j));
  j.end_object();
  log(j);
}

std::string Reporter::drawn(int64_t epoch, const std::vector<BatchRef>& order, JsonWriter& record) const {
  const TrainCorpora& corpora = *run_.train;
  std::vector<int64_t> batches(corpora.count()), pairs(corpora.count());
  for (const BatchRef b : order) {
    ++batches[b.corpus];
    pairs[b.corpus] += corpora.pairs(b);
  }
  std::string text = fmt::format("epoch {}:", epoch);
  record.key("corpora").begin_array();
  for (size_t c = 0; c < corpora.count(); ++c) {
    text += fmt::format("{} {} {} pairs ({} batches)", c == 0 ? "" : ",", corpora[c].path(),
                        grouped(pairs[c]), grouped(batches[c]));
    record.begin_object().field("path", corpora[c].path()).field("weight", run_.options.weights.at(c))
        .field("pairs", pairs[c]).field("batches", batches[c]).end_object();
  }
  record.end_array();
  return text;
}

void Reporter::start() {
  start_ = Clock::now();
  window_ = Window{};
  elapsed_base_ = run_.state.elapsed;
}

double Reporter::elapsed() const {
  return elapsed_base_ + std::chrono::duration<double>(Clock::now() - start_).count();
}

void Reporter::applied(const StepResult& r, double lr, int64_t epoch) {
  ++updates_;
  window_.loss += r.sums.loss;
  window_.nll += r.sums.nll;
  window_.tokens += r.sums.tokens;
  window_.grad_norm += r.grad_norm;
  ++window_.updates;
  report(lr, epoch);
}

void Reporter::report(double lr, int64_t epoch) {
  const TrainState& st = run_.state;
  const bool periodic = st.step % run_.options.log_every == 0;
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
      st.step, epoch, loss, std::exp(nll), lr, gnorm, tok_s, format_bytes(memory_bytes()),
      format_eta(eta()));
  if (run_.scaler.dynamic())
    text += fmt::format(" | scale {} | overflows {}", run_.scaler.scale(), st.overflow_steps);
  if (progress_.live()) progress_.status(text, periodic);
  if (!periodic) return;
  if (!progress_.live()) progress_.line(text);
  JsonWriter j;
  j.begin_object().field("event", "train").field("step", st.step).field("epoch", epoch)
      .field("loss", w.loss / tokens).field("nll", nll).field("ppl", std::exp(nll))
      .field("lr", lr).field("grad_norm", gnorm).field("tokens", w.tokens)
      .field("tokens_per_s", tok_s).field("loss_scale", run_.scaler.scale())
      .field("overflow_steps", st.overflow_steps).field("bad_steps", st.bad_steps)
      .field("elapsed", elapsed()).field("memory_bytes", memory_bytes())
      .end_object();
  log(j);
  window_ = Window{};
}

void Reporter::skipped(const StepResult& r, int64_t step) {
  JsonWriter j;
  j.begin_object().field("event", "skip").field("step", step)
      .field("reason", r.outcome == StepOutcome::overflow ? "overflow" : "nan")
      .field("loss", r.sums.loss).field("grad_norm", r.grad_norm)
      .field("loss_scale", run_.scaler.scale()).end_object();
  log(j);
}

void Reporter::validated(const LossSums& sum, bool better) {
  const TrainState& st = run_.state;
  const double tokens = static_cast<double>(std::max<int64_t>(1, sum.tokens));
  const double nll = sum.nll / tokens;
  progress_.line(fmt::format("update {}: dev loss {:.4f}, nll {:.4f}, ppl {:.3f}{}", st.step,
                             sum.loss / tokens, nll, std::exp(nll),
                             better ? " (best)"
                                    : fmt::format(" (best {:.3f} at update {}; {} without better)",
                                                  std::exp(*st.best_dev_nll), st.best_step,
                                                  st.stale_validations)));
  JsonWriter j;
  j.begin_object().field("event", "valid").field("step", st.step).field("loss", sum.loss / tokens)
      .field("nll", nll).field("ppl", std::exp(nll)).field("tokens", sum.tokens)
      .field("best_ppl", std::exp(*st.best_dev_nll)).field("best_step", st.best_step)
      .end_object();
  log(j);
}

void Reporter::checkpoint(const std::string& path, const char* why) {
  JsonWriter j;
  j.begin_object().field("event", "checkpoint").field("step", run_.state.step).field("path", path)
      .field("why", why).end_object();
  log(j);
}

void Reporter::stopped(StopReason reason, int signal, const std::string& last_checkpoint) {
  const TrainState& st = run_.state;
  if (reason == StopReason::interrupted)
    progress_.line(fmt::format("interrupted by {} after update {}; checkpoint written to {} "
                               "(resume with --resume {})",
                               signal ? strsignal(signal) : "a signal", st.step, last_checkpoint,
                               run_.dir->dir()));
  else
    progress_.line(fmt::format("done ({}): update {}, epoch {}, {} of training{}; checkpoint {}{}",
                               stop_reason_text(reason), st.step, st.epoch, format_eta(elapsed()),
                               skipped_text(), last_checkpoint, best_text()));
  JsonWriter j;
  j.begin_object().field("event", "stop").field("reason", stop_reason_text(reason))
      .field("step", st.step).field("epoch", st.epoch).field("elapsed", elapsed())
      .field("checkpoint", last_checkpoint).end_object();
  log(j);
}

// The time left at this run's pace: to --max-steps, or --max-time when it
// comes first; -1 when neither limits the run or nothing is done yet.
double Reporter::eta() const {
  if (updates_ == 0) return -1;
  const double per_update =
      std::chrono::duration<double>(Clock::now() - start_).count() / static_cast<double>(updates_);
  const TrainOptions& opt = run_.options;
  double left = INFINITY;
  if (opt.max_steps > 0) left = static_cast<double>(opt.max_steps - run_.state.step) * per_update;
  if (opt.max_time > 0) left = std::min(left, opt.max_time - elapsed());
  return std::isfinite(left) ? left : -1;
}

// Resident memory on the CPU; on a GPU, the planned memory (nothing grows).
size_t Reporter::memory_bytes() const {
  return run_.device.is_cpu() ? resident_bytes() : run_.model->memory_bytes();
}

// ", best DIR/checkpoint_best.bin (dev ppl 5.123 at update 900)", or
// nothing; the file named is one that exists (a run resumed from another
// directory has its best there until it validates better).
std::string Reporter::best_text() const {
  const TrainState& st = run_.state;
  if (!st.best_dev_nll) return {};
  const std::string& best = run_.best_checkpoint;
  const std::string where = best.empty() ? "dev ppl" : best + " (dev ppl";
  return fmt::format(", best {} {:.3f} at update {}{}", where, std::exp(*st.best_dev_nll),
                     st.best_step, best.empty() ? "; its checkpoint is not kept" : ")");
}

// ", 2 updates skipped for NaN/inf, 7 for fp16 overflows", or nothing.
std::string Reporter::skipped_text() const {
  const TrainState& st = run_.state;
  if (st.bad_steps == 0 && st.overflow_steps == 0) return {};
  return fmt::format(", {} updates skipped for NaN/inf, {} for fp16 overflows", st.bad_steps,
                     st.overflow_steps);
}

void Reporter::log(const JsonWriter& record) {
  if (run_.log) run_.log->write(record);
}

}  // namespace tfm::train
