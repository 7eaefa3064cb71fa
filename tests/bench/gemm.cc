// tests/bench/gemm: tfm's CPU sgemm on the model's real shapes, next to
// OpenBLAS with its AVX-512 kernels forced, measured in the same run.
//
// tfm loads OpenBLAS itself and picks the kernel from the CPU's features
// (kernels/cpu/blas.h). The reference is OpenBLAS with OPENBLAS_CORETYPE
// forced to each AVX-512 core, each in a child process (the core is fixed
// when the library loads), calling cblas_sgemm directly. tfm must reach 80%
// of the best forced figure on every shape; the exit status says whether it
// did (3 when it did not; 1 is an error). Results go to a table on stdout
// and a TSV file (--out).
//
// Then the decoder's products x W^T at 128 rows (32 sentences, beam 4) of
// base and of the demo model, with no verdict, measured in turn: OpenBLAS,
// tfm's row-invariant sgemm (on its widest path, and on AVX2 beside it
// where that is AVX-512: the same bits), the same with the weight packed
// once (what tfm-decode runs in fp32), and tfm's int8 GEMM (--precision
// int8) with and without its packed weight, each in GFLOP/s (int8:
// multiply-adds counted as float ones), and packed int8 over packed fp32.
// --decoder-only: that second table alone (no reference runs, no verdict).
//
//   gemm [--out FILE] [--repeats N] [--min-seconds S] [--decoder-only]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/gemm_rows.h"
#include "kernels/ops.h"
#include "libcore/app/app.h"
#include "libcore/io/atomic_file.h"

using namespace tfm;

namespace {

struct Shape3 {
  const char* role;
  int64_t m, k, n;
  bool ta, tb;
};

// Base model, 4096 tokens a batch, V = 37000 (the paper's).
const Shape3 kShapes[] = {
    {"attention projection  x W", 4096, 512, 512, false, false},
    {"feed-forward in       x W1", 4096, 512, 2048, false, false},
    {"feed-forward out      h W2", 4096, 2048, 512, false, false},
    {"output projection     x E^T", 4096, 512, 37000, false, true},
    {"weight gradient       x^T dy", 512, 4096, 512, true, false},
    {"output proj. backward dz E", 4096, 37000, 512, false, false},
};

// The decoder's x W^T (trans_b), 128 rows: base, then the demo model.
const Shape3 kDecoderShapes[] = {
    {"base q, k, v            x Wqkv^T", 128, 512, 1536, false, true},
    {"base feed-forward in    x W1^T", 128, 512, 2048, false, true},
    {"base feed-forward out   h W2^T", 128, 2048, 512, false, true},
    {"base output projection  x E^T", 128, 512, 37000, false, true},
    {"demo q, k, v            x Wqkv^T", 128, 128, 384, false, true},
    {"demo feed-forward in    x W1^T", 128, 128, 512, false, true},
    {"demo output projection  x E^T", 128, 128, 4000, false, true},
};

using Clock = std::chrono::steady_clock;

// Exit status when a shape falls under 80% of the reference (1 is an error).
constexpr int kSlow = 3;

// Median GFLOP/s of each of fs on one shape over `repeats` rounds, each
// round timing every f in turn, running it often enough to take at least
// min_seconds: a shared machine's slow moments then fall on all of them
// alike.
std::vector<double> measure_in_turn(const Shape3& s, int repeats, double min_seconds,
                                    const std::vector<std::function<void()>>& fs) {
  for (const auto& f : fs) f();  // warm-up: first touch of the pages, thread pool start
  const double flops = 2.0 * s.m * s.n * s.k;
  std::vector<std::vector<double>> rates(fs.size());
  for (int r = 0; r < repeats; ++r)
    for (size_t i = 0; i < fs.size(); ++i) {
      int calls = 0;
      const auto start = Clock::now();
      double elapsed = 0;
      do {
        fs[i]();
        ++calls;
        elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      } while (elapsed < min_seconds);
      rates[i].push_back(flops * calls / elapsed / 1e9);
    }
  std::vector<double> medians;
  for (std::vector<double>& v : rates) {
    std::sort(v.begin(), v.end());
    medians.push_back(v[v.size() / 2]);
  }
  return medians;
}

// The same for one function.
double measure(const Shape3& s, int repeats, double min_seconds, const std::function<void()>& f) {
  return measure_in_turn(s, repeats, min_seconds, {f})[0];
}

struct Operands {
  Tensor a, b, c;
};

Operands operands(const Shape3& s) {
  Stream cpu(Device::cpu());
  Operands o{Tensor(s.ta ? tfm::Shape{s.k, s.m} : tfm::Shape{s.m, s.k}, DType::f32),
             Tensor(s.tb ? tfm::Shape{s.n, s.k} : tfm::Shape{s.k, s.n}, DType::f32),
             Tensor({s.m, s.n}, DType::f32)};
  ops::uniform(o.a, {1, 1, 0}, -1, 1, cpu);
  ops::uniform(o.b, {1, 2, 0}, -1, 1, cpu);
  return o;
}

// Child mode: OpenBLAS as loaded under the caller's OPENBLAS_CORETYPE,
// cblas_sgemm called directly. Prints "INDEX GFLOPS" lines.
int run_raw(int repeats, double min_seconds) {
  const auto& blas = ops::cpu::blas();
  for (size_t i = 0; i < std::size(kShapes); ++i) {
    const Shape3& s = kShapes[i];
    Operands o = operands(s);
    const auto ta = s.ta ? ops::cpu::CblasTrans : ops::cpu::CblasNoTrans;
    const auto tb = s.tb ? ops::cpu::CblasTrans : ops::cpu::CblasNoTrans;
    const double rate = measure(s, repeats, min_seconds, [&] {
      blas.sgemm(ops::cpu::CblasRowMajor, ta, tb, int(s.m), int(s.n), int(s.k), 1.0f,
                 o.a.data_as<float>(), int(o.a.shape()[1]), o.b.data_as<float>(),
                 int(o.b.shape()[1]), 0.0f, o.c.data_as<float>(), int(s.n));
    });
    std::printf("%zu %.3f %s\n", i, rate, blas.core.c_str());
    std::fflush(stdout);
  }
  return 0;
}

// Runs this program as a child with OPENBLAS_CORETYPE=core; returns the
// rates by shape index, and the core the child reports it ran.
std::map<size_t, double> run_forced(const std::string& core, int repeats, double min_seconds,
                                    std::string* ran) {
  const std::string cmd = fmt::format("OPENBLAS_CORETYPE={} /proc/{}/exe --raw --repeats {} --min-seconds {}",
                                      core, getpid(), repeats, min_seconds);
  std::map<size_t, double> rates;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) fail("cannot start {}", cmd);
  char line[256];
  while (std::fgets(line, sizeof line, pipe)) {
    size_t index = 0;
    double rate = 0;
    char name[64] = {0};
    if (std::sscanf(line, "%zu %lf %63s", &index, &rate, name) == 3) {
      rates[index] = rate;
      *ran = name;
    }
  }
  const int status = pclose(pipe);
  if (status != 0) fail("the reference run with OPENBLAS_CORETYPE={} failed", core);
  return rates;
}

// The decoder's shapes, each product in turn (no verdict): OpenBLAS, the
// row-invariant GEMM (and on AVX2 where its widest path is AVX-512), packed,
// int8 and int8 packed.
void decoder_table(int repeats, double min_seconds) {
  Stream cpu(Device::cpu());
  const ops::cpu::RowGemmPath path = ops::cpu::gemm_row_invariant_path();
  const bool wide = path == ops::cpu::RowGemmPath::avx512;
  std::printf("row-inv: tfm's row-invariant GEMM on its %s path%s; packed: the weight in panels once "
              "(ModelWeights::pack_weights), as tfm-decode runs; int8 on %s\n",
              ops::cpu::row_gemm_path_name(path), wide ? "; inv AVX2: the same on AVX2" : "",
              ops::cpu::gemm_int8_amx()    ? "AMX tiles (K a multiple of 64)"
              : ops::cpu::gemm_int8_vnni() ? "AVX-512 VNNI"
                                           : ops::cpu::row_gemm_path_name(ops::cpu::gemm_int8_path()));
  std::printf("%-34s %20s %9s %9s %9s %9s %9s %9s %9s\n", "decoder shape", "M x K x N", "OpenBLAS", "row-inv",
              "inv AVX2", "packed", "int8", "int8 pk", "i8pk/pk");
  for (const Shape3& s : kDecoderShapes) {
    Operands o = operands(s);
    ops::GemmOptions blas;
    blas.trans_b = true;
    ops::GemmOptions inv = blas;
    inv.row_invariant = true;
    Tensor panels({ops::panels_floats(s.n, s.k)}, DType::f32);  // as the model's buffers: 2 MiB pages
    ops::pack_panels(o.b, panels.data_as<float>());
    ops::GemmOptions packed = inv;
    packed.packed_b = panels.data_as<float>();
    ops::cpu::GemmShape shape;
    shape.m = s.m, shape.n = s.n, shape.k = s.k, shape.lda = s.k, shape.ldb = s.k, shape.ldc = s.n;
    const int64_t ld = ops::int8_ld(s.k);
    std::vector<int8_t> values(static_cast<size_t>(s.n * ld));
    std::vector<float> scales(static_cast<size_t>(s.n));
    std::vector<int32_t> sums(static_cast<size_t>(s.n));
    ops::quantize_int8(o.b, values.data(), ld, scales.data(), sums.data());
    const ops::Int8Matrix w{values.data(), scales.data(), sums.data(), s.n, s.k, ld};
    Tensor int8_panels({ops::panels_floats(s.n, ld / 4)}, DType::i32);
    ops::pack_int8_panels(values.data(), s.n, ld, int8_panels.data_as<int32_t>());
    ops::Int8Matrix w_packed = w;
    w_packed.panels = int8_panels.data_as<int32_t>();
    std::vector<std::function<void()>> fs = {
        [&] { ops::gemm(o.a, o.b, o.c, blas, cpu); },
        [&] { ops::gemm(o.a, o.b, o.c, inv, cpu); },
        [&] { ops::gemm(o.a, o.b, o.c, packed, cpu); },
        [&] { ops::gemm_int8(o.a, w, o.c, cpu); },
        [&] { ops::gemm_int8(o.a, w_packed, o.c, cpu); }};
    if (wide)
      fs.push_back([&] {
        ops::cpu::gemm_row_invariant<float>(shape, o.a.data_as<float>(), o.b.data_as<float>(),
                                            o.c.data_as<float>(), nullptr, inv, ops::cpu::RowGemmPath::avx2);
      });
    const std::vector<double> r = measure_in_turn(s, repeats, min_seconds, fs);
    std::printf("%-34s %20s %9.1f %9.1f %9s %9.1f %9.1f %9.1f %8.2fx\n", s.role,
                fmt::format("{} x {} x {}", s.m, s.k, s.n).c_str(), r[0], r[1],
                wide ? fmt::format("{:.1f}", r[5]).c_str() : "-", r[2], r[3], r[4], r[4] / r[2]);
    std::fflush(stdout);
  }
  std::printf("\nGFLOP/s (int8: its multiply-adds counted as float ones)\n");
}

}  // namespace

int main(int argc, char** argv) {
  CommonOptions common;
  std::string out = "gemm.tsv";
  int repeats = 5;
  double min_seconds = 0.2;
  bool raw = false, decoder_only = false;
  CLI::App app{"CPU GEMM benchmark: tfm against OpenBLAS with AVX-512 kernels forced."};
  add_common_options(app, common);
  app.add_option("--out", out, "Write the results as TSV to this file")->capture_default_str();
  app.add_option("--repeats", repeats, "Timings per shape (the median is reported)")
      ->check(tfm::AtLeast(1))->capture_default_str();
  app.add_option("--min-seconds", min_seconds, "Shortest time of one timing")
      ->check(tfm::Range(0.001, 3600.0))->capture_default_str();
  app.add_flag("--decoder-only", decoder_only, "Only the decoder's shapes (no reference runs, no verdict)");
  app.add_flag("--raw", raw, "Internal: time cblas_sgemm directly (the reference child)")
      ->group("");
  int status = 0;
  const int rc = run_program("gemm", app, argc, argv, common, [&] {
    if (raw) {
      status = run_raw(repeats, min_seconds);
      return;
    }
    if (decoder_only) {
      std::printf("tfm's decoder GEMMs, %d threads, median of %d\n\n", ops::cpu::blas().threads, repeats);
      decoder_table(repeats, min_seconds);
      return;
    }
    const auto& blas = ops::cpu::blas();
    // The forced reference: every AVX-512 core this CPU can run, else the
    // AVX2 core; a CPU with neither has no reference and no verdict.
    const std::string best_core = ops::cpu::openblas_core_for_this_cpu();
    std::vector<std::string> cores;
    if (best_core == "Cooperlake") cores = {"SkylakeX", "Cooperlake"};
    else if (!best_core.empty()) cores = {best_core};
    std::vector<std::map<size_t, double>> forced;
    std::vector<std::string> forced_ran;
    for (const std::string& core : cores) {
      std::string ran;
      forced.push_back(run_forced(core, repeats, min_seconds, &ran));
      forced_ran.push_back(ran);
    }

    std::printf("tfm CPU sgemm: OpenBLAS core %s (%s), %d threads, median of %d\n\n",
                blas.core.c_str(), blas.core_source.c_str(), blas.threads, repeats);
    std::string header = fmt::format("{:<30} {:>22} {:>9}", "shape", "M x K x N", "tfm");
    for (const std::string& c : forced_ran) header += fmt::format(" {:>11}", c);
    header += fmt::format(" {:>7}  {}", "ratio", "verdict");
    std::printf("%s\n", header.c_str());
    std::string tsv = "role\tm\tk\tn\top\ttfm_gflops";
    for (const std::string& c : forced_ran) tsv += "\tforced_" + c + "_gflops";
    tsv += "\tratio\tok\n";

    Stream cpu(Device::cpu());
    bool all_ok = true;
    for (size_t i = 0; i < std::size(kShapes); ++i) {
      const Shape3& s = kShapes[i];
      Operands o = operands(s);
      ops::GemmOptions opt;
      opt.trans_a = s.ta;
      opt.trans_b = s.tb;
      const double tfm_rate = measure(s, repeats, min_seconds, [&] { ops::gemm(o.a, o.b, o.c, opt, cpu); });
      double best = 0;
      for (const auto& f : forced) best = std::max(best, f.count(i) ? f.at(i) : 0.0);
      const double ratio = best > 0 ? tfm_rate / best : 1.0;
      const bool ok = ratio >= 0.8;
      all_ok = all_ok && ok;
      const std::string op = fmt::format("{}{}", s.ta ? "T" : "N", s.tb ? "T" : "N");
      std::string row = fmt::format("{:<30} {:>22} {:>9.1f}", s.role,
                                    fmt::format("{} x {} x {} {}", s.m, s.k, s.n, op), tfm_rate);
      tsv += fmt::format("{}\t{}\t{}\t{}\t{}\t{:.1f}", s.role, s.m, s.k, s.n, op, tfm_rate);
      for (const auto& f : forced) {
        row += fmt::format(" {:>11.1f}", f.count(i) ? f.at(i) : 0.0);
        tsv += fmt::format("\t{:.1f}", f.count(i) ? f.at(i) : 0.0);
      }
      const char* verdict = forced.empty() ? "no reference" : ok ? "ok (>= 80%)" : "SLOW (< 80%)";
      row += fmt::format(" {:>6.0f}%  {}", ratio * 100, verdict);
      tsv += fmt::format("\t{:.3f}\t{}\n", ratio, ok ? 1 : 0);
      std::printf("%s\n", row.c_str());
      std::fflush(stdout);
    }
    std::printf("\nGFLOP/s; ratio = tfm / best forced core.\n\n");

    decoder_table(repeats, min_seconds);
    std::printf("The first table written to %s\n", out.c_str());
    io::write_file_atomic(out, tsv);
    status = all_ok ? 0 : kSlow;
  });
  return rc != 0 ? rc : status;
}
