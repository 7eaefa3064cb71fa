// The Transformer of "Attention Is All You Need", section "Model
// Architecture": encoder-decoder, explicit forward and backward (no
// autograd), all parameters in one flat buffer.
//
// Memory is planned at construction from (config, limits): a named table of
// every saved activation and workspace buffer, sized for the largest batch
// the limits allow, one block per kind; report() prints the totals. A batch
// over the limits is an error, never a reallocation.
//
// Shapes: B batch, S source length, T target length, D d_model, H heads,
// K d_k, E d_v, F d_ff, V vocabulary. Activations are packed token rows,
// the padding left out: (Ns, D) for the encoder, Ns = sum of the source
// lengths, and (Nt, D) for the decoder. Only attention works on padded
// (B, H, T, S) tiles; every position-wise GEMM, norm and dropout skips the
// padding.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "libcore/base/memory.h"
#include "libcore/base/stream.h"
#include "libcore/model/batch.h"
#include "libcore/model/config.h"
#include "libcore/model/params.h"
#include "libcore/model/weights.h"

namespace tfm {

namespace detail {
class Pass;  // transformer.cc
}

struct ModelLimits {
  int64_t max_tokens = 4096;  // padded tokens on each side of a batch: B*S and B*T
  int64_t max_len = 256;      // longest sentence on either side (S, T; positions too)
  int64_t loss_chunk = 1024;  // target rows whose logits exist at once (C x V)
};

// A piece of the flat gradient buffer: elements [begin, end) of grads().
struct GradientPiece {
  int64_t begin = 0, end = 0;
};

// Told during backward that a piece of the gradient is final: nothing of
// the update adds to it again. Pieces come in the order
// Transformer::gradient_order() lists them, so they can be summed over
// processes while backward goes on (GradientReducer, train/data_parallel.h).
class GradientSink {
 public:
  virtual ~GradientSink() = default;
  virtual void ready(int piece) = 0;  // an index into gradient_order()
};

struct TrainStep {
  GradientSink* sink = nullptr;  // the update's last batch: told as pieces complete
  bool dropout = true;      // false: evaluation (every dropout is identity)
  uint64_t seed = 1;        // dropout masks are keyed by (seed, site, rng_step)
  uint32_t rng_step = 0;    // the step (and micro-batch) number
  float grad_scale = 1.0f;  // gradients are of grad_scale * (sum of token losses)
  bool tf32 = false;        // f32 GEMMs may use TF32 tensor cores (CUDA only)
};

struct LossSums {
  double loss = 0;     // sum of label-smoothed token losses
  double nll = 0;      // sum of -log p(target): perplexity = exp(nll / tokens)
  int64_t tokens = 0;  // target tokens (eos included, padding excluded)
};

// What an update reads back (receive_update): the loss sums of every batch
// since zero_grads(), the sum of squares of the accumulated gradient, and
// whether ops::update_control applied it.
struct UpdateSums {
  LossSums sums;
  double grad_squares = 0;
  bool applied = false;
};

// An update whose sums are on their way to the host (send_update).
struct UpdateTicket {
  int slot = -1;
  int64_t tokens = 0;  // its target tokens
};

// The model with the memory and passes of training and scoring around its
// weights (ModelWeights: parameters, their compute copy, int8 weights).
class Transformer : public ModelWeights {
 public:
  // dtype: the compute dtype of activations and matrix products. f32 on
  // either device; f64 on the CPU (tests); bf16 or f16 on CUDA, where the
  // parameters and gradients stay f32 (master weights) and a 16-bit copy of
  // the parameters feeds the GEMMs, refreshed at the start of every pass.
  Transformer(const ModelConfig& config, const ModelLimits& limits, Device device,
              DType dtype = DType::f32);
  ~Transformer() override;

  const ModelLimits& limits() const { return limits_; }

  // The flat gradient buffer, in the parameters' layout (layout()).
  TensorView grads() const;
  TensorView grad(int id) const { return layout_.view(grads(), id); }
  // Adam's first and second moments, in the parameters' layout (zeroed at
  // construction): the optimizer's share of the planned memory.
  std::pair<TensorView, TensorView> optimizer_state() const;
  // The pieces of grads() in the order backward completes them: each
  // decoder layer from the top, the final layer norms (pre-norm), each
  // encoder layer from the top, and last the embeddings (and learned
  // positions), which the output layer and both stacks add to, then the
  // output layer's own weights where it has them (untied, biased). Together
  // they cover the buffer once.
  std::vector<GradientPiece> gradient_order() const;

  // "parameters 240.6 MiB, gradients 240.6 MiB, optimizer 481.3 MiB,
  // activations ..., workspace ..., total ..."
  std::string memory_report() const override;
  size_t memory_bytes() const override;  // the total of that report

  // Starts an update: zeroes the gradients and the update's loss sums.
  void zero_grads();

  // Forward and backward: grads += d(grad_scale * loss) / d(params), and the
  // batch's loss sums into the update's. Queued on the stream: the host
  // does not wait for the GPU.
  void accumulate(const HostBatch& batch, const TrainStep& step);
  // Ends an update's batches: the gradient's sum of squares joins the loss
  // sums in update_sums() (queued, no wait).
  void finish_update();
  // The update in progress, on the device: {loss, nll, sum of the
  // gradient's squares} (f32; f64 for f64), and the decision made from them
  // (ops::update_control, (5) of the same dtype), which Adam reads.
  TensorView update_sums() const;
  TensorView update_control() const;
  // Starts update_sums() and the decision's `applied` toward the host,
  // behind the work queued so far and ahead of what comes next (the next
  // update's batches): the host does not wait. receive_update() waits for
  // that copy alone. Read a ticket before two more are sent.
  UpdateTicket send_update();
  UpdateSums receive_update(const UpdateTicket& ticket);
  bool update_arrived(const UpdateTicket& ticket) const;  // receive_update would not wait
  // accumulate(), then this batch's own loss sums, read back (tests, benches).
  LossSums forward_backward(const HostBatch& batch, const TrainStep& step);
  // Forward only, no dropout.
  LossSums evaluate(const HostBatch& batch);
  // log p(y_t | y_<t, x) for every target position: (B * T, V), forward
  // only, no dropout; a host tensor of the parameters' dtype. Rows at the
  // padding (t >= tgt_lengths[b]) are 0: the model never computes them.
  Tensor log_probs(const HostBatch& batch);

  // The encoder alone, no dropout, for the sources of `batch` (its targets
  // are not read): (B * S, D) on the device, valid until the next call.
  TensorView encode(const HostBatch& batch);

  // The attention weights of the last full pass (forward_backward,
  // evaluate, log_probs) as that pass computed them: each head's softmax
  // after the mask, before attention dropout, read from the buffer backward
  // uses. (B, H, Tq, Tk) on the device in the compute dtype, valid until
  // the next pass: (B, H, S, S) in the encoder, (B, H, T, T) in the decoder
  // (causal), (B, H, T, S) over the source. Hidden keys (padding, the
  // future) are 0; query rows past a sentence's end mean nothing. On CUDA
  // the tiles may be padded (Tq and Tk rounded up to multiples of 8, so the
  // attention GEMMs see 16-byte aligned rows): the weights of the batch's
  // (S, T) lengths are then the top-left corner of each (Tq, Tk) map.
  enum class Attention { encoder, decoder, cross };
  TensorView attention_probs(Attention kind, int64_t layer) const;

  struct Plan;  // the named activation table (plan.h)

 private:
  friend class detail::Pass;  // runs the passes over this model's memory
  void upload(const HostBatch& batch);  // upload.cc, with attention_tiles
  void attention_tiles();  // Sa_, Ta_ of the uploaded batch
  void forward(const TrainStep& step);
  void backward(const TrainStep& step);
  // The output projection and the loss, chunk by chunk; sums (2) += the
  // batch's {loss, nll}.
  void output_loss(const TrainStep& step, bool with_grads, const TensorView& sums);

  ModelLimits limits_;
  std::unique_ptr<Plan> plan_;
  std::unique_ptr<PlannedMemory> memory_;
  Tensor positions_;  // sinusoid table on the device (sinusoidal positions), param dtype
  int64_t B_ = 0, S_ = 0, T_ = 0;  // the current batch
  int64_t Ns_ = 0, Nt_ = 0;        // its packed token rows: source, target
  int64_t Sa_ = 0, Ta_ = 0;        // its attention tiles' lengths (S, T or, on CUDA, padded)
  int64_t tokens_ = 0;
  int64_t update_tokens_ = 0;  // target tokens since zero_grads()
  std::unique_ptr<HostStaging> staging_;    // batch uploads
  std::unique_ptr<HostReadback> readback_;  // updates' sums on their way to the host
};

}  // namespace tfm
