// tests/bench/data: the data programs' throughput, measured in one run.
//
//  1. tfm-tok encode, in MB/s of input text, next to Debian's spm_encode on
//     the same input with the same model (a vocabulary of 8000 trained here
//     with tfm::data::train_vocab on Multi30k train en+de, the input those
//     lines repeated to --mb MB). Both run as children writing pieces to a
//     file, best of 3 each; their outputs must be byte-identical, and tfm-tok
//     (every core) must reach 1.5x spm_encode (one thread, all it has).
//  2. tfm-batch on --pairs synthetic pairs of random pieces of that
//     vocabulary, best of 3: pairs/s (target >= 500k) and the child's peak
//     RSS (ru_maxrss from wait4, the largest of the runs), which must stay
//     within 2x the .tfmb it writes. Its CPU time is printed too: on a
//     shared machine it says what the wall time cannot.
//
// The exit status says whether every target was met (3 when one was not; 1
// is an error). Results go to a table on stdout and a TSV file (--out).
//
//   data [--out FILE] [--work DIR] [--keep] [--pairs N] [--mb N] [--data DIR]
//        [--tfm-tok PATH] [--tfm-batch PATH] [--spm-encode PATH]
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "libcore/app/app.h"
#include "libcore/base/error.h"
#include "libcore/data/corpus.h"
#include "libcore/data/line_reader.h"
#include "libcore/data/tokenize.h"
#include "libcore/data/vocab.h"
#include "libcore/io/atomic_file.h"

#ifndef TFM_BENCH_SOURCE_DIR
#define TFM_BENCH_SOURCE_DIR "tests/bench"
#endif
#ifndef TFM_BENCH_TFM_TOK
#define TFM_BENCH_TFM_TOK "tfm-tok"
#endif
#ifndef TFM_BENCH_TFM_BATCH
#define TFM_BENCH_TFM_BATCH "tfm-batch"
#endif

using namespace tfm;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// Exit status when a target is missed (1 is an error).
constexpr int kMissed = 3;
constexpr double kEncodeRatio = 1.5;       // tfm-tok MB/s over spm_encode MB/s
constexpr double kBatchPairsPerS = 500e3;  // tfm-batch pairs/s
constexpr double kRssOverFile = 2.0;       // tfm-batch peak RSS over .tfmb bytes
constexpr int64_t kVocabSize = 8000;
constexpr int kEncodeRepeats = 3;
constexpr int kBatchRepeats = 3;
constexpr int kMinLen = 5, kMaxLen = 60;   // synthetic sentence lengths, in pieces
constexpr double kMaxRatio = 9;            // tfm-batch's default --max-ratio

struct Options {
  CommonOptions common;
  std::string out = "data.tsv";
  std::string work;  // empty: mkdtemp under /tmp
  bool keep = false;
  int64_t pairs = 1000000;
  int64_t mb = 32;
  std::string data = TFM_BENCH_SOURCE_DIR "/../../../shared/data";
  std::string tfm_tok = TFM_BENCH_TFM_TOK;
  std::string tfm_batch = TFM_BENCH_TFM_BATCH;
  std::string spm_encode = "spm_encode";
};

// The work directory: removed at the end (on errors too) when this run made
// it, else only the files written into it; nothing with --keep.
class WorkDir {
 public:
  WorkDir(const std::string& dir, bool keep) : keep_(keep) {
    if (dir.empty()) {
      std::string tmpl = (fs::temp_directory_path() / "tfm-bench-data-XXXXXX").string();
      TFM_REQUIRE(mkdtemp(tmpl.data()) != nullptr, "cannot make a temporary directory {}", tmpl);
      path_ = tmpl;
      created_ = true;
    } else {
      path_ = dir;
      std::error_code ec;
      created_ = fs::create_directories(path_, ec);
      TFM_REQUIRE(!ec && fs::is_directory(path_), "cannot make the work directory {}", dir);
    }
  }
  ~WorkDir() {
    if (keep_) return;
    std::error_code ec;
    if (created_) {
      fs::remove_all(path_, ec);
    } else {
      for (const std::string& f : files_) fs::remove(f, ec);
    }
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;

  // A path in the directory, remembered for the clean-up.
  std::string file(const std::string& name) {
    files_.push_back((fs::path(path_) / name).string());
    return files_.back();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool created_ = false, keep_;
  std::vector<std::string> files_;
};

struct ChildRun {
  double seconds = 0;
  double cpu_seconds = 0;      // user + system time of the child
  int64_t peak_rss_bytes = 0;  // ru_maxrss of the child
};

std::string tail_of(const std::string& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.size() > bytes) s = "..." + s.substr(s.size() - bytes);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// Runs argv[0] (searched in PATH when it has no '/') with stdout to
// `stdout_path` and stderr to `stderr_path`; the wall time covers fork to
// wait4. Throws Error with the tail of stderr when the child fails.
ChildRun run_child(const std::vector<std::string>& argv, const std::string& stdout_path,
                   const std::string& stderr_path) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const auto start = Clock::now();
  const pid_t pid = fork();
  TFM_REQUIRE(pid >= 0, "cannot fork to run {}", argv[0]);
  if (pid == 0) {
    const int out = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
    execvp(args[0], args.data());
    dprintf(2, "cannot run %s\n", args[0]);
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  pid_t got;
  do got = wait4(pid, &status, 0, &usage);
  while (got < 0 && errno == EINTR);
  ChildRun r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  TFM_REQUIRE(got == pid, "lost the child running {}", argv[0]);
  r.peak_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;
  r.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                  static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  std::string cmd;
  for (const std::string& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail("{} failed ({} {}): {}", cmd, WIFEXITED(status) ? "exit status" : "signal",
         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), tail_of(stderr_path, 400));
  return r;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TFM_REQUIRE(in.good(), "cannot read {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// 0 when equal, else the 1-based number of the first line that differs.
int64_t first_difference(const std::string& a, const std::string& b) {
  if (a == b) return 0;
  const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  (void)ib;
  return 1 + std::count(a.begin(), ia, '\n');
}

// Multi30k train lines, en then de, repeated until the text holds at least
// `bytes` bytes (whole lines).
int64_t write_encode_input(const std::vector<std::string>& sources, int64_t bytes,
                           const std::string& path) {
  std::string one;
  for (const std::string& src : sources) {
    data::LineReader reader(src);
    std::string line;
    while (reader.next(line)) (one += line) += '\n';
  }
  TFM_REQUIRE(!one.empty(), "the training text {} is empty", sources[0]);
  std::string text;
  text.reserve(static_cast<size_t>(bytes) + one.size());
  while (static_cast<int64_t>(text.size()) < bytes) {
    const size_t want = static_cast<size_t>(bytes) - text.size();
    if (want >= one.size()) {
      text += one;
    } else {  // up to the end of the line that crosses the size
      const size_t end = one.find('\n', want - 1);
      text.append(one, 0, end + 1);
    }
  }
  io::write_file_atomic(path, text);
  return static_cast<int64_t>(text.size());
}

// Random pieces of the vocabulary (reserved ids 0..3 left out), lengths
// uniform in [5, 60] on the source and, on the target, in the part of
// [5, 60] that keeps the pair within tfm-batch's default --max-ratio, so
// every pair is kept. Seeded: the same files every run.
void write_synthetic_pairs(const Vocab& vocab, int64_t pairs, const std::string& src_path,
                           const std::string& tgt_path) {
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  const int64_t v = vocab.size();
  std::vector<std::string> pieces;
  for (int64_t id = 4; id < v; ++id) pieces.emplace_back(vocab.piece(static_cast<int32_t>(id)));
  std::FILE* src = std::fopen(src_path.c_str(), "wb");
  std::FILE* tgt = std::fopen(tgt_path.c_str(), "wb");
  TFM_REQUIRE(src && tgt, "cannot write {}", src ? tgt_path : src_path);
  std::string s, t;
  auto sentence = [&](std::string& out, int len) {
    for (int i = 0; i < len; ++i) {
      if (i) out += ' ';
      out += pieces[next(pieces.size())];
    }
    out += '\n';
  };
  bool ok = true;
  for (int64_t p = 0; p < pairs && ok; ++p) {
    const int ls = kMinLen + static_cast<int>(next(kMaxLen - kMinLen + 1));
    const int lo = std::max(kMinLen, static_cast<int>((ls + kMaxRatio - 1) / kMaxRatio));
    const int hi = std::min(kMaxLen, static_cast<int>(ls * kMaxRatio));
    const int lt = lo + static_cast<int>(next(hi - lo + 1));
    sentence(s, ls);
    sentence(t, lt);
    if (s.size() > (1 << 20) || p + 1 == pairs) {
      ok = std::fwrite(s.data(), 1, s.size(), src) == s.size() &&
           std::fwrite(t.data(), 1, t.size(), tgt) == t.size();
      s.clear();
      t.clear();
    }
  }
  ok = (std::fclose(src) == 0) & (std::fclose(tgt) == 0) & ok;
  TFM_REQUIRE(ok, "cannot write the synthetic corpus in {}", fs::path(src_path).parent_path().string());
}

struct Row {
  std::string measure, unit, tfm, reference, ratio, target, verdict;
  bool ok;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Data benchmark: tfm-tok against spm_encode, tfm-batch throughput and memory."};
  add_common_options(app, o.common);
  app.add_option("--out", o.out, "Write the results as TSV to this file")->capture_default_str();
  app.add_option("--work", o.work, "Directory for the model, inputs and outputs (default: mkdtemp in /tmp)");
  app.add_flag("--keep", o.keep, "Leave the work directory and its files in place");
  app.add_option("--pairs", o.pairs, "Synthetic sentence pairs for tfm-batch")
      ->check(tfm::AtLeast(int64_t{1}))->capture_default_str();
  app.add_option("--mb", o.mb, "Size of the encode input in MB (10^6 bytes)")
      ->check(tfm::AtLeast(int64_t{1}))->capture_default_str();
  app.add_option("--data", o.data, "Data directory holding multi30k/task1/raw/train.{en,de}.gz")
      ->capture_default_str();
  app.add_option("--tfm-tok", o.tfm_tok, "The tfm-tok program")->capture_default_str();
  app.add_option("--tfm-batch", o.tfm_batch, "The tfm-batch program")->capture_default_str();
  app.add_option("--spm-encode", o.spm_encode, "The reference encoder")->capture_default_str();
  int status = 0;
  const int rc = run_program("data", app, argc, argv, o.common, [&] {
    const std::string raw = o.data + "/multi30k/task1/raw/";
    const std::vector<std::string> train = {raw + "train.en.gz", raw + "train.de.gz"};
    for (const std::string& f : train)
      TFM_REQUIRE(access(f.c_str(), R_OK) == 0, "cannot read {} (--data DIR)", f);
    for (const std::string& p : {o.tfm_tok, o.tfm_batch})
      TFM_REQUIRE(access(p.c_str(), X_OK) == 0, "cannot run {} (build it first)", p);
    WorkDir work(o.work, o.keep);
    std::printf("work directory %s%s; %s, %d threads\n", work.path().c_str(),
                o.keep ? " (kept)" : "", cpu_name().c_str(), cpu_threads());

    // ---- 1. encode ----
    data::TrainOptions topt;
    topt.output = work.file("spm.model");
    topt.vocab_size = kVocabSize;
    topt.seed = 1;
    auto start = Clock::now();
    data::train_vocab(train, topt);
    std::printf("trained %s (vocab %lld) on Multi30k train en+de in %.1f s\n", topt.output.c_str(),
                static_cast<long long>(kVocabSize),
                std::chrono::duration<double>(Clock::now() - start).count());
    const std::string input = work.file("encode.txt");
    const int64_t input_bytes = write_encode_input(train, o.mb * 1000000, input);
    const std::string tfm_out = work.file("encode.tfm"), spm_out = work.file("encode.spm");
    const std::string err_log = work.file("stderr.log");
    const int threads = cpu_threads();
    double tfm_s = 1e30, spm_s = 1e30;
    for (int r = 0; r < kEncodeRepeats; ++r) {  // interleaved, so drift hits both
      tfm_s = std::min(tfm_s, run_child({o.tfm_tok, "-m", topt.output, "--threads",
                                         std::to_string(threads), input},
                                        tfm_out, err_log).seconds);
      spm_s = std::min(spm_s, run_child({o.spm_encode, "--model=" + topt.output,
                                         "--output_format=piece", input},
                                        spm_out, err_log).seconds);
    }
    const double tfm_mbs = input_bytes / 1e6 / tfm_s, spm_mbs = input_bytes / 1e6 / spm_s;
    const double enc_ratio = tfm_mbs / spm_mbs;
    const int64_t differs = first_difference(read_all(tfm_out), read_all(spm_out));
    std::printf("encode: %.1f MB input, best of %d: tfm-tok %.3f s, spm_encode %.3f s; outputs %s\n",
                input_bytes / 1e6, kEncodeRepeats, tfm_s, spm_s,
                differs ? fmt::format("differ from line {}", differs).c_str() : "identical");

    // ---- 2. batch ----
    const Vocab vocab = Vocab::load(topt.output);
    const std::string src = work.file("pairs.src"), tgt = work.file("pairs.tgt");
    start = Clock::now();
    write_synthetic_pairs(vocab, o.pairs, src, tgt);
    std::printf("batch: wrote %lld synthetic pairs (%.0f + %.0f MB) in %.1f s\n",
                static_cast<long long>(o.pairs), fs::file_size(src) / 1e6, fs::file_size(tgt) / 1e6,
                std::chrono::duration<double>(Clock::now() - start).count());
    const std::string tfmb = work.file("out.tfmb");
    ChildRun batch{1e30, 0, 0};
    for (int r = 0; r < kBatchRepeats; ++r) {
      fs::remove(tfmb);  // each run writes a new file, as the first does
      const ChildRun run = run_child({o.tfm_batch, "-m", topt.output, "-o", tfmb, src, tgt},
                                     work.file("batch.log"), err_log);
      if (run.seconds < batch.seconds) {
        batch.seconds = run.seconds;
        batch.cpu_seconds = run.cpu_seconds;
      }
      batch.peak_rss_bytes = std::max(batch.peak_rss_bytes, run.peak_rss_bytes);
    }
    const int64_t tfmb_bytes = static_cast<int64_t>(fs::file_size(tfmb));
    const Corpus corpus = Corpus::read(tfmb);
    TFM_REQUIRE(static_cast<int64_t>(corpus.size()) == o.pairs,
                "tfm-batch kept {} of {} pairs; the synthetic pairs should all pass its filters",
                corpus.size(), o.pairs);
    const double pairs_per_s = o.pairs / batch.seconds;
    const double rss_ratio = static_cast<double>(batch.peak_rss_bytes) / tfmb_bytes;
    std::printf("batch: best of %d %.3f s (%.3f s of CPU), peak RSS %.1f MiB, %s %.1f MiB (%lld pairs, "
                "%lld + %lld tokens)\n",
                kBatchRepeats, batch.seconds, batch.cpu_seconds, batch.peak_rss_bytes / 1048576.0, tfmb.c_str(),
                tfmb_bytes / 1048576.0, static_cast<long long>(corpus.size()),
                static_cast<long long>(corpus.src_tokens()),
                static_cast<long long>(corpus.tgt_tokens()));

    // ---- results ----
    const bool enc_ok = enc_ratio >= kEncodeRatio;
    const bool pairs_ok = pairs_per_s >= kBatchPairsPerS;
    const bool rss_ok = rss_ratio <= kRssOverFile;
    const std::vector<Row> rows = {
        {"tfm-tok encode", "MB/s", fmt::format("{:.2f}", tfm_mbs),
         fmt::format("{:.2f} spm_encode", spm_mbs), fmt::format("{:.2f}x", enc_ratio),
         fmt::format(">= {:.1f}x", kEncodeRatio), enc_ok ? "ok" : "SLOW", enc_ok},
        {"encode output = spm_encode", "", differs ? fmt::format("line {} differs", differs) : "identical",
         "identical", "-", "identical", differs ? "DIFFERENT" : "ok", differs == 0},
        {"tfm-batch throughput", "pairs/s", fmt::format("{:.0f}", pairs_per_s),
         fmt::format("{:.0f} target", kBatchPairsPerS),
         fmt::format("{:.2f}x", pairs_per_s / kBatchPairsPerS), ">= 1.00x",
         pairs_ok ? "ok" : "SLOW", pairs_ok},
        {"tfm-batch peak RSS", "MiB", fmt::format("{:.1f}", batch.peak_rss_bytes / 1048576.0),
         fmt::format("{:.1f} .tfmb", tfmb_bytes / 1048576.0), fmt::format("{:.2f}x", rss_ratio),
         fmt::format("<= {:.1f}x", kRssOverFile), rss_ok ? "ok" : "OVER", rss_ok},
    };
    std::printf("\n%-27s %-8s %16s %22s %7s %9s  %s\n", "measure", "unit", "tfm",
                "reference/target", "ratio", "target", "verdict");
    std::string tsv = "measure\tunit\ttfm\treference\tratio\ttarget\tok\n";
    bool all_ok = true;
    for (const Row& r : rows) {
      std::printf("%-27s %-8s %16s %22s %7s %9s  %s\n", r.measure.c_str(), r.unit.c_str(),
                  r.tfm.c_str(), r.reference.c_str(), r.ratio.c_str(), r.target.c_str(),
                  r.verdict.c_str());
      tsv += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\n", r.measure, r.unit, r.tfm, r.reference,
                         r.ratio, r.target, r.ok ? 1 : 0);
      all_ok = all_ok && r.ok;
    }
    std::printf("\nencode: %.1f MB of Multi30k, tfm-tok with %d threads, spm_encode single-threaded, "
                "best of %d each; batch: %lld pairs, best of %d. Written to %s\n",
                input_bytes / 1e6, threads, kEncodeRepeats, static_cast<long long>(o.pairs), kBatchRepeats,
                o.out.c_str());
    io::write_file_atomic(o.out, tsv);
    status = all_ok ? 0 : kMissed;
  });
  return rc != 0 ? rc : status;
}
