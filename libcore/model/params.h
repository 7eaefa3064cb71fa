// All parameters of the model in one flat buffer, with a named layout table
// (docs/architecture.md, "One flat parameter buffer"). Gradients, Adam moments and averaged
// checkpoints use the same layout, so each of them is one pass over one
// buffer. Names follow fairseq's, so converting checkpoints is a rename.
//
// Linear weights are stored (out, in), as PyTorch's nn.Linear: y = x W^T + b.
#pragma once

#include <string>
#include <vector>

#include "libcore/base/rng.h"
#include "libcore/base/tensor.h"
#include "libcore/model/config.h"

namespace tfm {

struct ParamEntry {
  std::string name;
  Shape shape;
  int64_t offset = 0;  // in elements; a multiple of kAlign but inside a group
};

struct LinearIds { int weight = -1, bias = -1; };
struct NormIds { int gamma = -1, beta = -1; };
struct AttentionIds { LinearIds q, k, v, out; };
struct FfnIds { LinearIds fc1, fc2; };
struct EncoderLayerIds { AttentionIds self_attn; NormIds self_attn_norm; FfnIds ffn; NormIds ffn_norm; };
struct DecoderLayerIds {
  AttentionIds self_attn; NormIds self_attn_norm;
  AttentionIds cross_attn; NormIds cross_attn_norm;
  FfnIds ffn; NormIds ffn_norm;
};

class ParamLayout {
 public:
  static constexpr int64_t kAlign = 64;  // elements: 256 bytes in f32

  explicit ParamLayout(const ModelConfig& config);

  const std::vector<ParamEntry>& entries() const { return entries_; }
  const ParamEntry& entry(int id) const { return entries_[static_cast<size_t>(id)]; }
  int find(std::string_view name) const;  // -1 when absent
  int64_t total() const { return total_; }       // buffer length, with alignment gaps
  int64_t count() const;                         // parameters proper

  // The view of one parameter inside a flat buffer laid out by this table.
  TensorView view(const TensorView& flat, int id) const;
  // Parameters first..last of one group (laid side by side, with no gap),
  // seen as one tensor: matrices of equal width stacked into (sum of rows,
  // width), vectors joined. The attention's q, k and v form such groups.
  TensorView view(const TensorView& flat, int first, int last) const;
  // Whether inference multiplies by parameter id (x W^T): every matrix but
  // the learned positions and the embeddings that are not also the
  // pre-softmax weights (looked up, never multiplied). Int8Weights and PackedWeights
  // hold these.
  bool multiplied(int id) const;

  int src_embed = -1, tgt_embed = -1;   // the same id when embeddings are shared
  int out_proj = -1;                    // the pre-softmax weights (V, D): tgt_embed when tied
  int out_bias = -1;                    // (V), with ModelConfig::output_bias only
  int src_pos = -1, tgt_pos = -1;       // learned positions only
  std::vector<EncoderLayerIds> encoder;
  std::vector<DecoderLayerIds> decoder;
  NormIds encoder_norm, decoder_norm;   // pre-norm only

 private:
  // A new entry; the next one starts on kAlign unless it joins this one's group.
  int add(std::string name, Shape shape, bool group_with_next = false);
  LinearIds linear(const std::string& prefix, int64_t out, int64_t in);
  NormIds norm(const std::string& prefix, int64_t d);
  AttentionIds attention(const std::string& prefix, const ModelConfig& c);

  std::vector<ParamEntry> entries_;
  int64_t total_ = 0;
};

// Initial values, drawn from Philox (seed) so CPU and GPU start alike:
// linear weights Xavier-uniform, biases 0, layer-norm gain 1 and bias 0,
// embeddings N-like uniform with std D^-1/2, learned positions likewise.
// `flat` is the whole buffer (f32 or f64, any device), zero-filled first.
void init_parameters(const ParamLayout& layout, const ModelConfig& config, const TensorView& flat,
                     uint64_t seed, const Stream& stream);

// The sinusoids of positions [offset, offset + P), (P, D), laid out as
// `layout` (config.h; the paper's interleaved by default), computed in
// double and rounded.
Tensor sinusoid_table(int64_t positions, int64_t d_model, DType dtype,
                      PositionLayout layout = PositionLayout::interleaved, int64_t offset = 0);
// The model's own: its layout and offset.
Tensor sinusoid_table(const ModelConfig& config, int64_t positions, DType dtype);
// What the embedding lookup multiplies by: sqrt(D), or 1 (scale_embeddings).
float embedding_scale(const ModelConfig& config);

}  // namespace tfm
