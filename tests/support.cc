#include "tests/support.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "kernels/ops.h"
#include "libcore/base/error.h"

namespace tfm::test {

Tensor random(Shape shape, DType dtype, uint64_t seed, float lo, float hi) {
  const DType gen = dtype == DType::f64 ? DType::f64 : DType::f32;
  Tensor t(shape, gen);
  Stream cpu(Device::cpu());
  ops::uniform(t, RngKey{seed, 0, 0}, lo, hi, cpu);
  return gen == dtype ? std::move(t) : cast(t, dtype);
}

std::vector<double> to_f64(const TensorView& t) {
  Tensor host;
  const TensorView* h = &t;
  if (!t.device().is_cpu()) {
    // The tensor's producers may be on any stream of its device.
    device_synchronize(t.device());
    host = Tensor(t.shape(), t.dtype());
    copy(host, t, Stream(t.device()));
    h = &host.view();
  }
  const int64_t n = h->numel();
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double v = 0;
    switch (h->dtype()) {
      case DType::f32: v = h->data_as<float>()[i]; break;
      case DType::f64: v = h->data_as<double>()[i]; break;
      case DType::bf16: v = static_cast<float>(h->data_as<bf16>()[i]); break;
      case DType::f16: v = static_cast<float>(h->data_as<f16>()[i]); break;
      case DType::i32: v = h->data_as<int32_t>()[i]; break;
    }
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

Tensor from_f64(const std::vector<double>& values, Shape shape, DType dtype) {
  Tensor t(shape, dtype);
  REQUIRE(static_cast<int64_t>(values.size()) == t.numel());
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    switch (dtype) {
      case DType::f32: t.data_as<float>()[i] = static_cast<float>(v); break;
      case DType::f64: t.data_as<double>()[i] = v; break;
      case DType::bf16: t.data_as<bf16>()[i] = bf16(static_cast<float>(v)); break;
      case DType::f16: t.data_as<f16>()[i] = f16(static_cast<float>(v)); break;
      case DType::i32: t.data_as<int32_t>()[i] = static_cast<int32_t>(v); break;
    }
  }
  return t;
}

Tensor to_device(const TensorView& t, Device device) {
  Tensor out(t.shape(), t.dtype(), device);
  device_synchronize(t.device());  // its producers may be on any stream
  Stream stream(device.is_cuda() ? device : t.device());
  copy(out, t, stream);
  stream.synchronize();  // ready for any stream the test runs on
  return out;
}

Tensor cast(const TensorView& t, DType dtype) { return from_f64(to_f64(t), t.shape(), dtype); }

bool same_bits(const TensorView& a, const TensorView& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ha = to_device(a, Device::cpu()), hb = to_device(b, Device::cpu());
  return std::memcmp(ha.view().data(), hb.view().data(), ha.view().bytes()) == 0;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    ref += b[i] * b[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(ref), 1e-30);
}

std::vector<double> without_key_biases(const std::vector<double>& params, const ParamLayout& layout) {
  std::vector<bool> drop(params.size(), false);
  for (const ParamEntry& e : layout.entries()) {
    if (!e.name.ends_with("k_proj.bias")) continue;
    const auto begin = static_cast<size_t>(e.offset), end = begin + static_cast<size_t>(e.shape.numel());
    REQUIRE(end <= params.size());
    std::fill(drop.begin() + static_cast<std::ptrdiff_t>(begin), drop.begin() + static_cast<std::ptrdiff_t>(end), true);
  }
  std::vector<double> out;
  out.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i)
    if (!drop[i]) out.push_back(params[i]);
  return out;
}

Tolerance tolerance_for(DType dtype, int64_t reduction) {
  // Unit roundoff of the stored result, with room for the accumulated
  // error of a length-`reduction` sum of O(1) terms (grows like its sqrt).
  double base = 0;
  switch (dtype) {
    case DType::f64: base = 1e-13; break;
    case DType::f32: base = 4e-6; break;
    case DType::f16: base = 2e-3; break;
    case DType::bf16: base = 1.6e-2; break;
    case DType::i32: base = 0; break;
  }
  const double growth = std::max(1.0, std::sqrt(static_cast<double>(reduction)) / 2);
  return {base * growth, base};
}

Verdict compare(const Check& c) {
  const std::vector<double> got = to_f64(c.got);
  if (got.size() != c.ref.size())
    return {false, fmt::format("{}: {} elements, reference has {}", c.name, got.size(), c.ref.size())};
  double worst_share = -1;
  size_t worst = 0;
  bool ok = true;
  for (size_t i = 0; i < got.size(); ++i) {
    const double allowed = c.tol.atol + c.tol.rtol * std::abs(c.ref[i]);
    const double err = std::abs(got[i] - c.ref[i]);
    // NaN anywhere is a failure and the worst element.
    const double share = std::isnan(got[i]) ? INFINITY : (allowed > 0 ? err / allowed : (err > 0 ? INFINITY : 0));
    if (share > worst_share) {
      worst_share = share;
      worst = i;
    }
    if (!(share <= 1.0)) ok = false;
  }
  if (got.empty()) return {true, c.name + ": empty"};
  return {ok, fmt::format("{}: worst element {} got {:.9g} ref {:.9g}, {:.0f}% of tolerance "
                          "(atol {:.2g}, rtol {:.2g})",
                          c.name, worst, got[worst], c.ref[worst], worst_share * 100, c.tol.atol,
                          c.tol.rtol)};
}

void require_close(std::initializer_list<Check> checks) {
  for (const Check& c : checks) {
    const Verdict v = compare(c);
    INFO(v.report);
    CHECK(v.ok);
  }
}

Tensor i32(const std::vector<int>& values) {
  Tensor t({static_cast<int64_t>(values.size())}, DType::i32);
  for (size_t i = 0; i < values.size(); ++i) t.data_as<int32_t>()[i] = values[i];
  return t;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.where().empty() ? std::string(e.what()) : fmt::format("{} ({})", e.what(), e.where());
  }
  return "(no error)";
}

std::vector<int> random_ints(int64_t count, int64_t below, uint64_t seed) {
  std::vector<int> out(static_cast<size_t>(count));
  for (int& v : out) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<int>((seed >> 33) % static_cast<uint64_t>(below));
  }
  return out;
}

std::vector<std::vector<int32_t>> random_sentences(int64_t n, int64_t lo, int64_t hi, int64_t V, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  const auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  std::vector<std::vector<int32_t>> out;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int32_t> s(static_cast<size_t>(lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1))));
    for (int32_t& w : s) w = 4 + static_cast<int32_t>(next() % static_cast<uint64_t>(V - 4));
    out.push_back(std::move(s));
  }
  return out;
}

std::pair<std::vector<std::vector<int32_t>>, std::vector<std::vector<int32_t>>> random_pairs(size_t n, int64_t V,
                                                                                          uint32_t seed,
                                                                                          uint32_t longest) {
  std::vector<std::vector<int32_t>> src, tgt;
  uint32_t x = seed;
  auto next = [&](uint32_t m) {
    x = x * 1664525u + 1013904223u;
    return (x >> 8) % m;
  };
  for (size_t i = 0; i < n; ++i) {
    std::vector<int32_t> s(1 + next(longest)), t(next(longest + 1));
    for (int32_t& id : s) id = static_cast<int32_t>(4 + next(static_cast<uint32_t>(V - 4)));
    for (int32_t& id : t) id = static_cast<int32_t>(4 + next(static_cast<uint32_t>(V - 4)));
    src.push_back(std::move(s));
    tgt.push_back(std::move(t));
  }
  return {std::move(src), std::move(tgt)};
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/tfm-test-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

size_t TempDir::entries() const {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(path_),
                                           std::filesystem::directory_iterator()));
}

std::vector<double> finite_difference(const Tensor& x, const std::function<double()>& loss) {
  const double h = 1e-6;
  double* p = x.data_as<double>();
  std::vector<double> g(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double keep = p[i];
    p[i] = keep + h;
    const double up = loss();
    p[i] = keep - h;
    const double down = loss();
    p[i] = keep;
    g[static_cast<size_t>(i)] = (up - down) / (2 * h);
  }
  return g;
}

double weighted_sum(const TensorView& w, const TensorView& y) {
  const std::vector<double> a = to_f64(w), b = to_f64(y);
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::vector<double> gemm_reference(const TensorView& a, const TensorView& b, const TensorView& c0,
                                   bool trans_a, bool trans_b, double alpha, double beta,
                                   const TensorView& bias, bool relu) {
  const std::vector<double> A = to_f64(a), B = to_f64(b), C0 = to_f64(c0);
  const std::vector<double> bias_v = bias.empty() ? std::vector<double>{} : to_f64(bias);
  const int64_t m = c0.dim(-2), n = c0.dim(-1);
  const int64_t k = trans_a ? a.dim(-2) : a.dim(-1);
  const int64_t g_count = c0.numel() / (m * n);
  const int64_t a_stride = a.rank() == 2 ? 0 : a.dim(-2) * a.dim(-1);
  const int64_t b_stride = b.rank() == 2 ? 0 : b.dim(-2) * b.dim(-1);
  const int64_t lda = a.dim(-1), ldb = b.dim(-1);
  std::vector<double> out(C0.size());
  for (int64_t g = 0; g < g_count; ++g)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double av = A[static_cast<size_t>(g * a_stride + (trans_a ? p * lda + i : i * lda + p))];
          const double bv = B[static_cast<size_t>(g * b_stride + (trans_b ? j * ldb + p : p * ldb + j))];
          sum += av * bv;
        }
        const size_t ci = static_cast<size_t>(g * m * n + i * n + j);
        double v = alpha * sum + (beta != 0 ? beta * C0[ci] : 0.0);
        if (!bias_v.empty()) v += bias_v[static_cast<size_t>(j)];
        if (relu) v = std::max(v, 0.0);
        out[ci] = v;
      }
  return out;
}

}  // namespace tfm::test
