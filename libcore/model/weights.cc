#include "libcore/model/weights.h"

#include "kernels/ops.h"
#include "libcore/base/error.h"
#include "libcore/model/int8.h"
#include "libcore/model/packed.h"

namespace tfm {

ModelWeights::ModelWeights(const ModelConfig& config, Device device, DType dtype)
    : config_(config), device_(device), dtype_(dtype),
      param_dtype_(dtype == DType::f64 ? DType::f64 : DType::f32), layout_(config) {
  config_.validate();
  const bool ok = dtype == DType::f32 || (device.is_cpu() && dtype == DType::f64) ||
                  (device.is_cuda() && (dtype == DType::bf16 || dtype == DType::f16));
  TFM_REQUIRE(ok, "the model computes in f32 (f64 on the cpu for tests, bf16 or f16 on cuda), not {} on {}",
              dtype_name(dtype), device.str());
  stream_ = std::make_unique<Stream>(device);
  params_ = plan_.add(MemoryKind::parameters, "params", param_dtype_, {layout_.total()});
  if (dtype_ != param_dtype_) shadow_ = plan_.add(MemoryKind::parameters, "params.compute", dtype_, {layout_.total()});
  memory_ = std::make_unique<PlannedMemory>(plan_, device);
  // What the op layer's libraries take beside the plan (OpenBLAS's GEMM
  // buffers), checked now rather than found missing in the first GEMM.
  try {
    ops::check_library_memory(device);
  } catch (const Error& e) {
    throw Error(fmt::format("{}; the plan needs {}", e.what(), plan_.report()));
  }
}

ModelWeights::~ModelWeights() = default;

TensorView ModelWeights::params() const { return memory_->view(params_); }

TensorView ModelWeights::weights() const { return shadow_ >= 0 ? memory_->view(shadow_) : params(); }

void ModelWeights::init(uint64_t seed) { init_parameters(layout_, config_, params(), seed, *stream_); }

void ModelWeights::refresh_weights() {
  if (shadow_ >= 0) ops::cast(params(), weights(), *stream_);
}

void ModelWeights::quantize_int8() {
  TFM_REQUIRE(device_.is_cpu() && dtype_ == DType::f32,
              "int8 inference runs on the CPU from f32 parameters (on a GPU: --precision bf16)");
  int8_ = std::make_unique<model::Int8Weights>(layout_, params());
}

void ModelWeights::pack_weights() {
  if (int8_)
    int8_->pack();
  else if (device_.is_cpu() && dtype_ == DType::f32)
    packed_ = std::make_unique<model::PackedWeights>(layout_, params());
}

std::string ModelWeights::report_with(const MemoryPlan& plan) const {
  std::string report = plan.report();
  if (int8_) report += fmt::format("; int8 weights {}", format_bytes(int8_->bytes()));
  const size_t packed = (packed_ ? packed_->bytes() : 0) + (int8_ ? int8_->packed_bytes() : 0);
  if (packed > 0) report += fmt::format("; packed weights {}", format_bytes(packed));
  const size_t outside = ops::library_memory_bytes(device_);
  if (outside == 0) return report;
  return fmt::format("{}; beside the plan, OpenBLAS's GEMM buffers {}", report, format_bytes(outside));
}

std::string ModelWeights::memory_report() const { return report_with(plan_); }

size_t ModelWeights::memory_bytes() const { return plan_.total(); }

}  // namespace tfm
