// Test support shared by unit/ and cuda/: seeded random tensors, float64
// references, and comparisons that report the worst element.
//
// A comparison is |got - ref| <= atol + rtol * |ref| elementwise, with the
// tolerance taken from the dtype of `got` (and the reduction length for
// GEMMs). Checks are written as one table of {name, tensor, reference,
// tolerance}, so no tensor is compared twice or forgotten.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"
#include "libcore/model/params.h"

namespace tfm::test {

// A CPU tensor of `dtype` (f32, f64, bf16 or f16) with values uniform in
// [lo, hi), from Philox keyed by `seed` (fresh per test, fixed per run).
Tensor random(Shape shape, DType dtype, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

// Any tensor on any device, as float64 on the host. A device tensor is
// read after all work on its device (every stream) has finished.
std::vector<double> to_f64(const TensorView& t);

// A CPU tensor of `dtype` holding `values` (rounded to the dtype).
Tensor from_f64(const std::vector<double>& values, Shape shape, DType dtype);

// The same tensor on another device, ready for every stream on return (or
// as another dtype, rounding).
Tensor to_device(const TensorView& t, Device device);
Tensor cast(const TensorView& t, DType dtype);

// Whether two tensors (on any devices) hold the same shape, dtype and
// bytes; and two float buffers the same bits.
bool same_bits(const TensorView& a, const TensorView& b);
bool same_bits(const std::vector<float>& a, const std::vector<float>& b);

// ||a - b|| / ||b||, norm-wise over a whole buffer (b the reference).
double relative_error(const std::vector<double>& a, const std::vector<double>& b);

// The flat parameters (ParamLayout order) less every key projection's bias:
// its gradient is zero in exact arithmetic (a constant added to all of a
// query's scores leaves the softmax unchanged), so what devices compute
// for it is rounding noise of either sign, which Adam's first steps turn
// into updates of +-lr. Parameters of two devices after Adam are compared
// without them; they change no output.
std::vector<double> without_key_biases(const std::vector<double>& params, const ParamLayout& layout);

struct Tolerance {
  double atol = 0, rtol = 0;
};
// From the dtype's precision; `reduction` is the length of the sums that
// produced each element (K for a GEMM, 1 for elementwise ops).
Tolerance tolerance_for(DType dtype, int64_t reduction = 1);

struct Check {
  std::string name;
  TensorView got;
  std::vector<double> ref;
  Tolerance tol;
};

struct Verdict {
  bool ok = true;
  std::string report;  // "C: worst element 17 got 0.51 ref 0.50, 37% of tolerance"
};
Verdict compare(const Check& check);

// Runs every check; on failure REQUIREs with the worst element of each.
void require_close(std::initializer_list<Check> checks);

// A CPU i32 tensor (ids, lengths, targets) holding `values`.
Tensor i32(const std::vector<int>& values);

// The message of the tfm::Error that fn throws, with " (WHERE)" when it
// names a place; "(no error)" when it throws none. Other exceptions escape.
std::string error_of(const std::function<void()>& fn);
// `count` integers uniform in [0, below), from a seeded LCG (index tables).
std::vector<int> random_ints(int64_t count, int64_t below, uint64_t seed);
// `n` sentences of lo..hi words, each an id in [4, V) (past the reserved
// ids), from a seeded xorshift: the copy task of tests/pipeline/copy.sh
// at lo 3, hi 10, V 14.
std::vector<std::vector<int32_t>> random_sentences(int64_t n, int64_t lo, int64_t hi, int64_t V, uint64_t seed);
// `n` (source, target) pairs of ids in [4, V) from a seeded LCG: sources
// of 1..longest ids, targets of 0..longest (model scores' test pairs).
std::pair<std::vector<std::vector<int32_t>>, std::vector<std::vector<int32_t>>> random_pairs(size_t n, int64_t V,
                                                                                          uint32_t seed,
                                                                                          uint32_t longest);

// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  size_t entries() const;  // files and folders directly inside

 private:
  std::string path_;
};

// d loss / d x by central differences (h = 1e-6), perturbing the f64 CPU
// tensor x in place, one element at a time.
std::vector<double> finite_difference(const Tensor& x, const std::function<double()>& loss);

// sum_i w_i * y_i in float64: the scalar loss whose gradient wrt y is w.
double weighted_sum(const TensorView& w, const TensorView& y);

// C = act(alpha * op(A) op(B) + beta * C0 + bias) in float64, row-major,
// batched over the leading dimension (G, ...), broadcasting rank-2 A or B.
std::vector<double> gemm_reference(const TensorView& a, const TensorView& b, const TensorView& c0,
                                   bool trans_a, bool trans_b, double alpha, double beta,
                                   const TensorView& bias, bool relu);

// Runs Catch on argv (argv[0] the program) and returns its exit status;
// `default_spec` (e.g. "~[large]"), when given, selects the tests to run
// where the arguments name none. The test executables' main calls it.
int run_catch(int argc, char** argv, const char* default_spec = nullptr);

}  // namespace tfm::test
