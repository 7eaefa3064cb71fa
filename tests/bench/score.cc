// tests/bench/score: tfm-score against sacreBLEU on the same input, in one run.
//
// The input is --pairs sentence pairs (default 100,000) built from the WMT17
// en-de data: the 16 system outputs against their reference, repeated and
// perturbed (seeded) so that no two hypotheses repeat and sacreBLEU's
// tokenizer cache cannot help it. Both programs compute corpus BLEU (13a,
// exp) from the files; each is timed as a child process, best of --repeats;
// the two scores must print the same to 4 decimals. Targets: tfm-score
// under 2 s, and at least 10x sacreBLEU (run through the project's .venv).
// Exit status 3 when a target is missed (1 is an error); the table goes to
// stdout and a TSV to --out.
//
//   score [--out FILE] [--pairs N] [--repeats N] [--data DIR] [--tfm-score PATH] [--python PATH]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "libcore/app/app.h"
#include "libcore/app/sysinfo.h"
#include "libcore/base/error.h"
#include "libcore/eval/score.h"
#include "libcore/io/atomic_file.h"

#ifndef TFM_BENCH_SOURCE_DIR
#define TFM_BENCH_SOURCE_DIR "tests/bench"
#endif
#ifndef TFM_BENCH_TFM_SCORE
#define TFM_BENCH_TFM_SCORE "tfm-score"
#endif

using namespace tfm;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMissed = 3;
constexpr double kMaxSeconds = 2.0;  // tfm-score on the input
constexpr double kMinSpeedup = 10.0;  // over sacreBLEU

struct Options {
  CommonOptions common;
  std::string out = "score.tsv";
  int64_t pairs = 100000;
  int repeats = 3;
  std::string data = TFM_BENCH_SOURCE_DIR "/../../../shared/data";
  std::string tfm_score = TFM_BENCH_TFM_SCORE;
  std::string python = TFM_BENCH_SOURCE_DIR "/../../.venv/bin/python";
};

struct Timing {
  double wall = 0, cpu = 0;  // cpu: user + system time of the child (all its threads)
};

// Runs argv with stdout to `out_path`. Throws with the output's head on failure.
Timing run_child(const std::vector<std::string>& argv, const std::string& out_path) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(stdout);
  const auto start = Clock::now();
  const pid_t pid = fork();
  TFM_REQUIRE(pid >= 0, "cannot fork to run {}", argv[0]);
  if (pid == 0) {
    if (!std::freopen(out_path.c_str(), "w", stdout) || dup2(fileno(stdout), 2) < 0) _exit(126);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  Timing t;
  t.wall = std::chrono::duration<double>(Clock::now() - start).count();
  t.cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(out_path);
    std::stringstream ss;
    ss << in.rdbuf();
    fail("{} failed: {}", argv[0], ss.str().substr(0, 400));
  }
  return t;
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The WMT17 systems and reference, cycled to `pairs` lines; every
// hypothesis loses one word and swaps two (seeded), so lines rarely repeat.
void write_input(const std::string& wmt, int64_t pairs, const std::string& hyp_path,
                 const std::string& ref_path) {
  std::vector<std::string> systems;
  for (const auto& e : fs::directory_iterator(wmt))
    if (e.path().filename().string().rfind("newstest2017.", 0) == 0) systems.push_back(e.path().string());
  std::sort(systems.begin(), systems.end());
  TFM_REQUIRE(!systems.empty(), "no WMT17 system outputs in {}", wmt);
  const eval::Corpus ref = eval::read_corpus(wmt + "/newstest2017-ende-ref.de", {});
  std::ofstream hyp(hyp_path), refs(ref_path);
  uint64_t state = 0x2545F4914F6CDD1Dull;
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return n ? (state >> 33) % n : 0;
  };
  int64_t written = 0;
  for (int64_t round = 0; written < pairs; ++round) {
    const eval::Corpus c = eval::read_corpus(systems[round % systems.size()], {});
    for (size_t i = 0; i < c.hyps.size() && written < pairs; ++i, ++written) {
      std::string line = c.hyps[i];
      {
        std::vector<std::string> w;
        std::stringstream ss(line);
        for (std::string x; ss >> x;) w.push_back(x);
        if (w.size() > 2) {
          w.erase(w.begin() + static_cast<std::ptrdiff_t>(next(w.size())));
          std::swap(w[next(w.size())], w[next(w.size())]);
        }
        line.clear();
        for (const std::string& x : w) line += (line.empty() ? "" : " ") + x;
      }
      hyp << line << '\n';
      refs << ref.hyps[i] << '\n';
    }
  }
  TFM_REQUIRE(hyp.good() && refs.good(), "cannot write the benchmark input");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Score benchmark: tfm-score against sacreBLEU, corpus BLEU on the same files."};
  add_common_options(app, o.common);
  app.add_option("--out", o.out, "Write the results as TSV to this file")->capture_default_str();
  app.add_option("--pairs", o.pairs, "Sentence pairs in the input")
      ->check(tfm::AtLeast(int64_t{1}))
      ->capture_default_str();
  app.add_option("--repeats", o.repeats, "Runs of each program (the best counts)")
      ->check(tfm::AtLeast(1))->capture_default_str();
  app.add_option("--data", o.data, "Data directory holding sacrebleu-tests/")->capture_default_str();
  app.add_option("--tfm-score", o.tfm_score, "The tfm-score program")->capture_default_str();
  app.add_option("--python", o.python, "A Python with sacrebleu 2.6.0 (the project's .venv)")->capture_default_str();
  int status = 0;
  const int rc = run_program("score", app, argc, argv, o.common, [&] {
    TFM_REQUIRE(access(o.tfm_score.c_str(), X_OK) == 0, "cannot run {} (build it first)", o.tfm_score);
    TFM_REQUIRE(access(o.python.c_str(), X_OK) == 0, "cannot run {} (make -f Makefile.data deps)", o.python);
    char tmpl[] = "/tmp/tfm-bench-score-XXXXXX";
    TFM_REQUIRE(mkdtemp(tmpl) != nullptr, "cannot make a temporary directory");
    const std::string dir = tmpl;
    struct Cleanup {
      std::string dir;
      ~Cleanup() { std::error_code ec; fs::remove_all(dir, ec); }
    } cleanup{dir};
    const std::string hyp = dir + "/hyp.de", ref = dir + "/ref.de";
    write_input(o.data + "/sacrebleu-tests/wmt17-newstest2017-en-de", o.pairs, hyp, ref);
    std::printf("input: %lld pairs (%.1f + %.1f MB); %s, %d threads\n", static_cast<long long>(o.pairs),
                fs::file_size(hyp) / 1e6, fs::file_size(ref) / 1e6, cpu_name().c_str(), cpu_threads());
    // Interleaved, so that drift and other load hit both; the best run counts.
    Timing tfm_t{1e30, 1e30}, ref_t{1e30, 1e30};
    for (int r = 0; r < o.repeats; ++r) {
      const Timing a = run_child({o.tfm_score, "-r", ref, "-i", hyp, "-b", "-w", "4"}, dir + "/tfm.out");
      const Timing b = run_child({o.python, "-m", "sacrebleu", ref, "-i", hyp, "-b", "-w", "4"}, dir + "/sacrebleu.out");
      tfm_t = {std::min(tfm_t.wall, a.wall), std::min(tfm_t.cpu, a.cpu)};
      ref_t = {std::min(ref_t.wall, b.wall), std::min(ref_t.cpu, b.cpu)};
    }
    const double tfm_s = tfm_t.wall, ref_s = ref_t.wall;
    double load[3] = {0, 0, 0};
    getloadavg(load, 3);
    const std::string tfm_score = first_line(dir + "/tfm.out"), ref_score = first_line(dir + "/sacrebleu.out");
    const double speedup = ref_s / tfm_s;
    const bool same = tfm_score == ref_score, fast = tfm_s < kMaxSeconds, ratio_ok = speedup >= kMinSpeedup;
    std::printf("\n%-22s %10s %12s %9s %10s  %s\n", "measure", "tfm-score", "sacreBLEU", "ratio", "target",
                "verdict");
    std::printf("%-22s %10s %12s %9s %10s  %s\n", "BLEU (13a, exp)", tfm_score.c_str(), ref_score.c_str(), "-",
                "identical", same ? "ok" : "DIFFERENT");
    std::printf("%-22s %10.3f %12.3f %8.1fx %10s  %s\n", "seconds, best of runs", tfm_s, ref_s, speedup,
                ">= 10x", ratio_ok ? "ok" : "SLOW");
    std::printf("%-22s %10.3f %12s %9s %10s  %s\n", "tfm-score seconds", tfm_s, "-", "-", "< 2 s",
                fast ? "ok" : "SLOW");
    std::printf("%-22s %10.3f %12.3f %8.1fx %10s  %s\n", "CPU seconds (info)", tfm_t.cpu, ref_t.cpu,
                ref_t.cpu / tfm_t.cpu, "-", "-");
    std::printf("\nbest of %d runs each (wall clock decides), both reading the same files; load average "
                "%.1f at the end; written to %s\n", o.repeats, load[0], o.out.c_str());
    io::write_file_atomic(o.out, fmt::format("measure\ttfm\treference\tratio\ttarget\tok\n"
                                             "bleu\t{}\t{}\t-\tidentical\t{}\n"
                                             "seconds\t{:.3f}\t{:.3f}\t{:.2f}\t>=10x\t{}\n"
                                             "tfm_seconds\t{:.3f}\t-\t-\t<2\t{}\n"
                                             "cpu_seconds\t{:.3f}\t{:.3f}\t{:.2f}\t-\t1\n",
                                             tfm_score, ref_score, same ? 1 : 0, tfm_s, ref_s, speedup,
                                             ratio_ok ? 1 : 0, tfm_s, fast ? 1 : 0, tfm_t.cpu, ref_t.cpu,
                                             ref_t.cpu / tfm_t.cpu));
    status = same && fast && ratio_ok ? 0 : kMissed;
  });
  return rc != 0 ? rc : status;
}
