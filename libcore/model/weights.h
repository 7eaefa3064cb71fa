// A model's parameters on a device, and what inference multiplies by: the
// compute-dtype copy the GEMMs read, or the int8 weights. This is all a
// decoder needs (IncrementalDecoder, tfm-decode): a ModelWeights plans no
// gradients, optimizer state or pass activations. A Transformer is one,
// with the memory and passes of training and scoring around it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "libcore/base/memory.h"
#include "libcore/base/stream.h"
#include "libcore/model/config.h"
#include "libcore/model/params.h"

namespace tfm {

namespace model {
class Int8Weights;
class PackedWeights;
}

class ModelWeights {
 public:
  // dtype: the compute dtype. f32 on either device; f64 on the CPU (tests);
  // bf16 or f16 on CUDA, where the parameters stay f32 (master weights) and
  // a 16-bit copy of them feeds the GEMMs (refresh_weights).
  ModelWeights(const ModelConfig& config, Device device, DType dtype = DType::f32);
  virtual ~ModelWeights();
  ModelWeights(const ModelWeights&) = delete;
  ModelWeights& operator=(const ModelWeights&) = delete;

  const ModelConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  Device device() const { return device_; }
  DType dtype() const { return dtype_; }              // compute
  DType param_dtype() const { return param_dtype_; }  // parameters (and a Transformer's gradients)
  const Stream& stream() const { return *stream_; }

  // The flat parameter buffer (layout()) and one parameter in it.
  TensorView params() const;
  TensorView param(int id) const { return layout_.view(params(), id); }
  // What the GEMMs read: the 16-bit copy of the parameters, or the
  // parameters themselves when compute and parameter dtypes agree.
  TensorView weights() const;
  TensorView weight(int id) const { return layout_.view(weights(), id); }

  void init(uint64_t seed);
  // Refreshes the 16-bit copy from the parameters (no-op without one). A
  // Transformer's passes do it themselves; a decoder's owner calls it once
  // the parameters are loaded.
  void refresh_weights();

  // Inference on the CPU with 8-bit weights from now on (--precision int8):
  // quantizes the matrices of the f32 parameters (model/int8.h), which
  // decoders and a Transformer's forward passes then multiply by; training
  // passes refuse. Call it after the parameters are loaded: later changes
  // to them are not seen.
  void quantize_int8();
  const model::Int8Weights* int8_weights() const { return int8_.get(); }
  // Inference on the CPU: the matrices copied once into the layout the
  // decoder's GEMMs read, beside the parameters (their size again), so that
  // no step copies them: in f32 (model/packed.h), or after quantize_int8
  // its 8-bit rows (Int8Weights::pack). The same bits. Call it after the
  // parameters are loaded: later changes to them are not seen. A no-op but
  // on the CPU in f32 or int8.
  void pack_weights();
  const model::PackedWeights* packed_weights() const { return packed_.get(); }

  // "parameters 240.6 MiB, total ..." (a Transformer's: its whole plan).
  virtual std::string memory_report() const;
  virtual size_t memory_bytes() const;

 protected:
  // The memory report of `plan` with the weights' own (int8, libraries).
  std::string report_with(const MemoryPlan& plan) const;
  const MemoryPlan& weights_plan() const { return plan_; }

  ModelConfig config_;
  Device device_;
  DType dtype_, param_dtype_;
  ParamLayout layout_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<model::Int8Weights> int8_;
  std::unique_ptr<model::PackedWeights> packed_;

 private:
  MemoryPlan plan_;
  int params_ = -1, shadow_ = -1;  // shadow_: the 16-bit copy (16-bit compute only)
  std::unique_ptr<PlannedMemory> memory_;
};

}  // namespace tfm
