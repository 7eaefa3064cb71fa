// Model FLOPs utilization in two units that are never mixed: against the
// card's specified dense peak (a data-sheet figure, by the device's name),
// and against the best rate a large square GEMM reaches on the card in the
// same run (what cuBLASLt can do there, measured). Both divide the same
// exact count of a training step's matrix FLOPs (training_flops), whose
// terms the benchmark prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "libcore/base/device.h"
#include "libcore/base/precision.h"
#include "libcore/model/batch.h"
#include "libcore/model/config.h"

namespace tfm::bench {

// The matrix products of one training step (forward, then backward at twice
// the forward's FLOPs: the gradients of the inputs and of the weights), 2
// FLOPs a multiply-add, on the batch's real lengths (padding is not work):
//   encoder, each layer, S source tokens: projections 2 S d (2 h dk + 2 h dv)
//     and the feed-forward 4 S d dff;
//   decoder, each layer, T target tokens: self-attention projections as the
//     encoder's on T, the cross-attention's query and output 2 T d (h dk + h dv)
//     and its keys and values from the encoder's S rows 2 S d (h dk + h dv),
//     the feed-forward 4 T d dff;
//   attention scores and context, per sentence of s source and t target
//     tokens: 2 s^2 h (dk + dv) in each encoder layer; 2 t^2 h (dk + dv)
//     (the masked half of the causal square counted, as the dense product
//     computes it) and 2 t s h (dk + dv) in each decoder layer;
//   the output layer 2 T d V.
// Layer norms, softmax, dropout, the loss and Adam are not matrix products
// and are not counted (nor in the peak they are measured against).
struct FlopTerm {
  std::string name;
  double forward = 0;  // FLOPs of the forward pass
};
struct TrainingFlops {
  std::vector<FlopTerm> terms;
  double forward = 0;  // the terms' sum
  double step = 0;     // 3 x forward
  // The terms as lines of a table, each with its share of the step.
  std::string describe() const;
};
TrainingFlops training_flops(const ModelConfig& config, const HostBatch& batch);

// The card's specified dense (no sparsity) tensor-core TFLOP/s for bf16 and
// fp16 (H100 SXM and H200 989.4, H100 NVL 835.5, H100 PCIe 756.5, A100
// 312), by the device's name; 0 where the name or the precision is not in
// the table (the caller then needs a figure given by hand). `card` is set to
// the name read.
double spec_peak_tflops(Device device, Precision precision, std::string* card);

// The best rate of bf16 square GEMMs (C = A B, f32 accumulation, random
// normal operands) through tfm's own GEMM (cuBLASLt) at sizes 4096, 8192
// and 16384, each the median of `repeats` after warm-ups; `detail` gets
// each size's rate. 0 on the CPU.
double measured_gemm_peak_tflops(Device device, int repeats, std::string* detail);

}  // namespace tfm::bench
