#include "libcore/data/tokenize.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "libcore/base/error.h"
#include "libcore/base/log.h"
#include "libcore/base/progress.h"
#include "libcore/data/line_reader.h"
#include "libcore/data/pipeline.h"
#include "libcore/data/token_line.h"
#include "libcore/io/atomic_file.h"

// Exported by libsentencepiece but not declared in its public headers:
// 0 info, 1 warning, 2 error.
namespace sentencepiece::logging {
void SetMinLogLevel(int v);
}

namespace tfm::data {

namespace {

// Feeds SentencePiece's trainer every line of every input, in order, one
// input open at a time. Before training, every file that is not a stream
// is opened and closed (one that cannot be opened fails at once); stdin, a
// pipe or a FIFO is opened once, at its turn, so that the bytes read to
// tell gzip from text stay in its reader. An Error while reading is kept
// and rethrown after training stops.
class FilesIterator : public sentencepiece::SentenceIterator {
 public:
  explicit FilesIterator(const std::vector<std::string>& inputs) : inputs_(inputs) {
    for (const std::string& path : inputs)
      if (path != "-" && !is_stream(path)) LineReader check(path);
    Next();
  }

  bool done() const override { return done_; }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override {
    if (error_) return sentencepiece::util::Status(sentencepiece::util::StatusCode::kDataLoss, error_->what());
    return {};
  }
  void Next() override {
    try {
      for (;;) {
        if (!reader_) {
          if (next_input_ == inputs_.size()) {
            done_ = true;
            reading_done_ = true;
            return;
          }
          reader_ = std::make_unique<LineReader>(inputs_[next_input_++]);
        }
        if (reader_->next(line_)) {
          ++lines_;
          if ((lines_ & 1023) == 0) {
            shared_lines_ = lines_;
            shared_bytes_ = done_bytes_ + std::max<int64_t>(0, reader_->position());
          }
          if (line_.find_first_not_of(" \t\r") != std::string::npos) ++text_lines_;
          return;
        }
        done_bytes_ += std::max<int64_t>(0, reader_->position());
        shared_lines_ = lines_;
        shared_bytes_ = done_bytes_;
        reader_.reset();
      }
    } catch (const Error& e) {
      error_ = e;
      done_ = true;
      reading_done_ = true;
    }
  }

  const std::optional<Error>& error() const { return error_; }
  int64_t lines() const { return lines_; }
  // For another thread's progress line: lines and bytes read so far (every
  // 1024 lines), and whether the reading has ended.
  int64_t shared_lines() const { return shared_lines_; }
  int64_t shared_bytes() const { return shared_bytes_; }
  bool reading_done() const { return reading_done_; }
  int64_t text_lines() const { return text_lines_; }  // lines that are not blank

 private:
  const std::vector<std::string>& inputs_;
  size_t next_input_ = 0;
  std::unique_ptr<LineReader> reader_;
  std::string line_;
  bool done_ = false;
  int64_t done_bytes_ = 0;  // of the inputs read to their end
  std::atomic<int64_t> shared_lines_ = 0, shared_bytes_ = 0;
  std::atomic<bool> reading_done_ = false;
  int64_t lines_ = 0, text_lines_ = 0;
  std::optional<Error> error_;
};

// The bytes of every input when all are regular files, else -1.
int64_t total_size(const std::vector<std::string>& inputs) {
  int64_t total = 0;
  for (const std::string& path : inputs) {
    const int64_t size = input_size(path);
    if (size < 0) return -1;
    total += size;
  }
  return total;
}

// Runs `job` while a thread reports on `progress` at once and then every
// 100 ms, with the text `text()` gives (when one is due).
template <typename Text, typename Job>
void with_ticker(Progress* progress, Text text, Job job) {
  if (progress == nullptr || progress->quiet()) return job();
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  std::thread ticker([&] {
    std::unique_lock lock(m);
    do
      if (progress->due()) progress->report(text(), true);
    while (!cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return stop; }));
  });
  auto join = [&] {
    {
      std::lock_guard lock(m);
      stop = true;
    }
    cv.notify_all();
    ticker.join();
  };
  try {
    job();
  } catch (...) {
    join();
    throw;
  }
  join();
  progress->end_live();
}

std::string join(const std::vector<std::string>& items, char sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

// Splits on single spaces, keeping empty fields, as spm_decode does.
std::vector<std::string> split_spaces(std::string_view line) {
  std::vector<std::string> fields;
  size_t start = 0;
  for (;;) {
    const size_t sp = line.find(' ', start);
    fields.emplace_back(line.substr(start, sp == std::string_view::npos ? sp : sp - start));
    if (sp == std::string_view::npos) return fields;
    start = sp + 1;
  }
}

}  // namespace

void train_vocab(const std::vector<std::string>& inputs, const TrainOptions& o) {
  TFM_REQUIRE(!inputs.empty(), "no input files to train on");
  TFM_REQUIRE(o.model_type == "bpe" || o.model_type == "unigram",
              "unknown model type '{}' (use bpe or unigram)", o.model_type);
  TFM_REQUIRE(o.vocab_size > 4, "--vocab-size must be more than the 4 reserved pieces, got {}",
              o.vocab_size);
  TFM_REQUIRE(o.character_coverage > 0 && o.character_coverage <= 1,
              "--character-coverage must be in (0, 1], got {}", o.character_coverage);
  const int64_t size = total_size(inputs);

  std::unordered_map<std::string, std::string> args = {
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"character_coverage", fmt::format("{}", o.character_coverage)},
      {"pad_id", std::to_string(kPadId)},
      {"unk_id", std::to_string(kUnkId)},
      {"bos_id", std::to_string(kBosId)},
      {"eos_id", std::to_string(kEosId)},
      {"pad_piece", "<pad>"},
      {"unk_piece", "<unk>"},
      {"bos_piece", "<s>"},
      {"eos_piece", "</s>"},
      {"num_threads", std::to_string(thread_count(o.threads))},
  };
  if (o.max_sentences > 0) {
    args["input_sentence_size"] = std::to_string(o.max_sentences);
    args["shuffle_input_sentence"] = "true";
  }
  if (!o.user_symbols.empty()) args["user_defined_symbols"] = join(o.user_symbols, ',');
  if (o.seed >= 0) sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(o.seed));
  sentencepiece::logging::SetMinLogLevel(o.verbose ? 0 : 2);

  FilesIterator lines(inputs);
  log::info("training a {} model of {} pieces from {} file(s)", o.model_type, o.vocab_size,
            inputs.size());
  const auto start = std::chrono::steady_clock::now();
  std::string model;
  sentencepiece::util::Status status;
  // SentencePiece reads every line first (their count and bytes shown),
  // then trains without a word until it is done (the time shown).
  const auto text = [&] {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!lines.reading_done())
      return reading_text("reading", lines.shared_lines(), lines.shared_bytes(), size, s);
    return fmt::format("training on {} lines: {}", lines.shared_lines(), format_eta(s));
  };
  with_ticker(o.progress, text, [&] { status = sentencepiece::SentencePieceTrainer::Train(args, &lines, &model); });
  if (lines.error()) throw *lines.error();
  if (!status.ok()) {
    if (lines.text_lines() == 0)
      fail("cannot train the model: the input ({}) holds no text, only {} empty line{}",
           join(inputs, ' '), lines.lines(), lines.lines() == 1 ? "" : "s");
    // "./src/trainer_interface.cc(660) [check] Vocabulary size too high ...": the sentence only.
    std::string_view why = status.error_message();
    if (const size_t cut = why.find("] "); why.rfind("./", 0) == 0 && cut != why.npos)
      why.remove_prefix(cut + 2);
    if (why.empty())
      fail("cannot train the model: SentencePiece's trainer failed without a reason (status code {})",
           static_cast<int>(status.code()));
    fail("cannot train the model: {}", why);
  }

  // Check what was trained before it replaces anything.
  const Vocab vocab = Vocab::from_bytes(model, o.output);
  TFM_REQUIRE(vocab.piece(kPadId) == "<pad>" && vocab.piece(kUnkId) == "<unk>" &&
                  vocab.piece(kBosId) == "<s>" && vocab.piece(kEosId) == "</s>",
              "the trained model does not have the reserved pieces at ids 0-3");
  io::write_file_atomic(o.output, model);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log::info("{} lines, {} pieces, {:.1f} s: wrote {} ({})", lines.lines(), vocab.size(), seconds,
            o.output, vocab.fingerprint());
}

std::string encode_line(const Vocab& vocab, std::string_view line, bool ids, Side side) {
  if (!ids) return join(vocab.encode_pieces(line, side), ' ');
  std::string out;
  for (const int32_t id : vocab.encode_ids(line, side)) {
    if (!out.empty()) out += ' ';
    out += std::to_string(id);
  }
  return out;
}

std::string decode_line(const Vocab& vocab, std::string_view line, bool ids, Side side) {
  std::vector<std::string> fields = split_spaces(line);
  if (!ids) return vocab.decode_pieces(fields, side);
  std::vector<int32_t> values;
  values.reserve(fields.size());
  for (const std::string& f : fields) {
    if (f.empty() && fields.size() == 1) break;  // an empty line
    values.push_back(parse_token_id(f, vocab.size()));
  }
  return vocab.decode_ids(values, side);
}

void tokenize_stream(const Vocab& vocab, const std::vector<std::string>& inputs,
                     std::FILE* out, const StreamOptions& o) {
  const std::vector<std::string> paths = inputs.empty() ? std::vector<std::string>{"-"} : inputs;
  const int threads = thread_count(o.threads);
  const Side side = o.side.value_or(o.mode == TokMode::encode ? Side::source : Side::target);
  std::vector<std::string> lines, results;
  for (const std::string& path : paths) {
    LineReader reader(path);
    const auto file_start = std::chrono::steady_clock::now();
    for (;;) {
      lines.clear();
      const int64_t first_line = reader.line_number() + 1;
      const size_t n = reader.next_chunk(lines, o.chunk_lines);
      if (n == 0) break;
      results.assign(n, {});
      // Each thread takes a contiguous stripe; the first error per stripe is kept.
      const int used = static_cast<int>(std::min<size_t>(threads, (n + 63) / 64));
      std::vector<std::optional<std::pair<size_t, Error>>> errors(used);
      auto work = [&](int t) {
        const size_t begin = n * t / used, end = n * (t + 1) / used;
        for (size_t i = begin; i < end; ++i) {
          try {
            results[i] = o.mode == TokMode::encode ? encode_line(vocab, lines[i], o.ids, side)
                                                   : decode_line(vocab, lines[i], o.ids, side);
          } catch (const Error& e) {
            errors[t].emplace(i, e);
            return;
          }
        }
      };
      std::vector<std::thread> pool;
      for (int t = 1; t < used; ++t) pool.emplace_back(work, t);
      work(0);
      for (auto& th : pool) th.join();
      size_t good = n;
      const Error* error = nullptr;
      for (const auto& e : errors)
        if (e && e->first < good) {
          good = e->first;
          error = &e->second;
        }
      for (size_t i = 0; i < good; ++i) {
        std::fwrite(results[i].data(), 1, results[i].size(), out);
        std::fputc('\n', out);
      }
      if (error)
        throw Error(error->what(), fmt::format("{}:{}", reader.path(), first_line + int64_t(good)));
      if (std::fflush(out) != 0) fail("cannot write the output: {}", std::strerror(errno));
      if (o.progress && o.progress->due()) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - file_start).count();
        o.progress->report(reading_text(reader.path(), reader.line_number(), reader.position(), reader.size(), s),
                           true);
      }
    }
  }
  if (o.progress) o.progress->end_live();
}

}  // namespace tfm::data
