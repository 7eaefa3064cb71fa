#include "libcore/base/precision.h"

#include <algorithm>

#include "libcore/base/error.h"

namespace tfm {
namespace {

bool gpu_only(Precision p) { return p == Precision::tf32 || p == Precision::bf16 || p == Precision::fp16; }
bool cpu_only(Precision p) { return p == Precision::int8; }

// "a", "a or b", "a, b or c".
std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

}  // namespace

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::automatic: return "auto";
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
    case Precision::int8: return "int8";
  }
  return "?";
}

DType compute_dtype(Precision p) {
  switch (p) {
    case Precision::bf16: return DType::bf16;
    case Precision::fp16: return DType::f16;
    default: return DType::f32;
  }
}

std::vector<std::string> PrecisionChoices::names() const {
  std::vector<std::string> out;
  for (Precision p : offered) out.emplace_back(precision_name(p));
  return out;
}

Precision PrecisionChoices::parse(std::string_view what, std::string_view name) const {
  for (Precision p : offered)
    if (name == precision_name(p)) return p;
  fail("{} must be {}, got '{}'", what, listed(names()), name);
}

Precision PrecisionChoices::resolve(Precision p, Device device) const {
  if (p == Precision::automatic) return device.is_cuda() ? Precision::bf16 : Precision::fp32;
  const bool on_gpu = device.is_cuda();
  if (on_gpu ? !cpu_only(p) : !gpu_only(p)) return p;
  std::vector<std::string> instead;
  for (Precision q : offered)
    if (q != Precision::automatic && (on_gpu ? !cpu_only(q) : !gpu_only(q)))
      instead.emplace_back(precision_name(q));
  fail("--precision {} computes on {} only (--device {}); on {} tfm {} in {}", precision_name(p),
       on_gpu ? "the CPU" : "a GPU", on_gpu ? "cpu" : "cuda", on_gpu ? "a GPU" : "the CPU", job,
       listed(instead));
}

}  // namespace tfm
