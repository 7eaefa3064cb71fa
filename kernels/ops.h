// The op catalogue: every numeric op of tfm, declared once, with its math.
//
// Contract for every op in this file:
// - Tensors are dense row-major TensorViews; shapes use the alphabet of
//   libcore/tensor.h. All tensors of one call and its stream are on one
//   device; a call that mixes devices, dtypes or shapes wrongly throws
//   tfm::Error with a sentence naming the op and the offending tensor.
// - Outputs marked `=` are written; outputs marked `+=` are accumulated.
//   Parameter gradients accumulate; activation gradients are written, except
//   on the residual stream.
// - "saves" names what forward keeps for backward.
// - Dispatch is one switch on the device in kernels/ops.cc; implementations
//   live in kernels/cpu/NAME.cc and kernels/cuda/NAME.cu, NAME the first
//   word of the section that declares the op. A CPU-only build
//   answers a CUDA tensor with "unsupported device: cuda (built without CUDA)".
// - CPU ops run in f32 and, for tests, f64; all float tensors of a call share
//   one dtype. CUDA ops take f32, bf16 or f16 storage and compute in f32;
//   there an op's parameters (table, gamma, beta) and parameter gradients
//   (dtable, dgamma, dbeta, sum_rows' out) may be f32 while its activations
//   are bf16 or f16 (fp32 master weights: docs/architecture.md). Saved
//   statistics (mean, rstd) and sums are f32 (f64 for f64 inputs). Ids and
//   lengths are i32.
// - Work is queued on `stream`; on CUDA the call returns before it is done.
// - Indices (ids, targets, lengths) out of range throw on the CPU. On CUDA,
//   where a kernel cannot throw, they are made harmless instead: an id's row
//   is zero (forward) or skipped (backward), a target >= V counts as
//   padding, a length over the key count is clamped. Callers validate ids on
//   the host before they reach a GPU (the model does).
#pragma once

#include "libcore/rng.h"
#include "libcore/stream.h"
#include "libcore/tensor.h"

namespace tfm::ops {

// The dtype of saved statistics (mean, rstd) and sums for tensors of dtype
// t (the contract above): f64 for f64, f32 otherwise.
inline DType stats_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

// ------------- gemm: the GEMM family (cpu/gemm.cc, gemm_rows.cc; cuda/gemm.cu)

struct GemmOptions {
  bool trans_a = false;  // op(A) = A^T
  bool trans_b = false;  // op(B) = B^T
  float alpha = 1.0f;
  float beta = 0.0f;     // 0: C is written (=); 1: C is accumulated (+=)
  bool relu = false;     // apply max(0, .) last (the feed-forward's first half)
  bool tf32 = false;     // CUDA, f32 inputs: allow TF32 tensor cores
  bool row_invariant = false;  // CPU: each row of C alone, in one fixed order, whatever the
                               // other rows (the decoder's batch invariance); see below
  const float* packed_b = nullptr;  // row_invariant, f32: B's values as pack_panels laid them
                                    // out, read instead of copying B into panels each call
};

// C = act(alpha * op(A) op(B) + beta * C + bias)
//   A: (G, M, K), or (G, K, M) with trans_a
//   B: (G, K, N), or (G, N, K) with trans_b
//   C: (G, M, N)          =  (beta 0)  or  +=  (beta 1)
//   bias: (N), optional (an empty view), broadcast over every row
// G is every dimension before the last two, flattened (none: G = 1). A or B
// may hold one matrix (rank 2) that every batch entry shares, as a weight
// shared across (B, H) does. Accumulation is in f32 (f64 for f64 tensors).
// dtypes: CPU A = B = C = bias in {f32, f64}; CUDA A = B in {f32, bf16, f16},
// C and bias either the same as A or f32.
// row_invariant (CPU; products x W^T: trans_b, not trans_a, B one matrix):
// every element of C is a dot product in one fixed order (kernels/cpu/
// gemm_rows.cc), so a row of C has the same bits whatever the other rows of
// A are, how many there are, where the row sits and how many threads run,
// and the same on every CPU. OpenBLAS promises none of that: its kernels sum
// an element by its place in a register block. Other shapes, and CUDA (no
// invariance is promised there: cuBLASLt picks its algorithm by M), ignore it.
void gemm(const TensorView& a, const TensorView& b, const TensorView& c,
          const GemmOptions& options, const Stream& stream, const TensorView& bias = {});

// The row-invariant GEMM copies B's rows into panels of 16 (B's column k
// of those rows contiguous) on every call. A weight that inference
// multiplies by every step can be laid out so once: w (N, K) f32 on the
// CPU into panels (panels_floats(N, K) floats, the last panel's rows past
// N zero), then GemmOptions::packed_b = panels with B = w: the same bits,
// without the copy (a rows [r0, r0 + n) view of w: panels + r0 K, r0 a
// multiple of kPanelRows).
constexpr int64_t kPanelRows = 16;
int64_t panels_floats(int64_t rows, int64_t cols);
void pack_panels(const TensorView& w, float* panels);

// ----------------------------------------------------------------- elementwise

// y = a + b                                    (same shape; y =; y may be a or b)
void add(const TensorView& a, const TensorView& b, const TensorView& y, const Stream& stream);

// y = max(0, x)                                (y =; saves y, whose sign is the mask)
void relu_forward(const TensorView& x, const TensorView& y, const Stream& stream);

// dx = dy * (y > 0)                            (dx =; dx may be dy)
void relu_backward(const TensorView& y, const TensorView& dy, const TensorView& dx,
                   const Stream& stream);

// y = x converted to y's dtype, rounding to nearest even   (same shape; y =)
// Any float dtypes, on the CPU too (f32 <-> bf16 / f16 / f64): the bridge
// between fp32 master weights and 16-bit compute.
void cast(const TensorView& x, const TensorView& y, const Stream& stream);

// y[r, :] = x[r, col : col + W]                 x (R, X), y (R, W) =, one dtype
// A block of columns, copied by a kernel on CUDA rather than a 2-D memcpy
// (the decoder's steps, captured as CUDA graphs, then hold only kernels).
void copy_columns(const TensorView& x, int64_t col, const TensorView& y, const Stream& stream);

// y[index[r], :] = x[r, col : col + W]          x (R, X), y (P, W) rows =, index (R) i32
// The rows of a block of columns to rows of y that index names (distinct),
// the index read when the work runs: the decoder writes a step's keys and
// values into its pools where extend_history put them, so that one CUDA
// graph serves every position. The CPU rejects an index outside [0, P);
// CUDA skips such a row.
void scatter_columns(const TensorView& x, int64_t col, const TensorView& index, const TensorView& y,
                     const Stream& stream);

// out[i] = lo + (hi - lo) * u_i, u_i = uniform01(philox_bits(key, i)) in [0, 1)
//                                             (out =; rounding may reach hi itself)
// The same key gives the same numbers on every device (libcore/rng.h).
void uniform(const TensorView& out, const RngKey& key, float lo, float hi, const Stream& stream);

// ----------------------------------- embedding: token embeddings and positions
// ids are i32 on the tensors' device. Rows of an (R, D) tensor are tokens.

// out[n, :] = scale * table[ids[n], :]                 ids (N), table (V, D), out (N, D) =
void embedding_forward(const TensorView& ids, const TensorView& table, float scale,
                       const TensorView& out, const Stream& stream);

// dtable[ids[n], :] += scale * dout[n, :]              dout (N, D), dtable (V, D) +=
void embedding_backward(const TensorView& ids, const TensorView& dout, float scale,
                        const TensorView& dtable, const Stream& stream);

// x[b, t, :] += table[offset + t, :]                    x (B, T, D) +=, table (P, D)
// Positions: a learned table, or the fixed sinusoidal one (sinusoid_table in
// libcore/model). offset + T <= P is required (offset: the decoding step).
void position_add(const TensorView& x, const TensorView& table, int64_t offset,
                  const Stream& stream);
// The same with the offset read when the work runs: offset (1) i32 on the
// tensors' device, or (B), one for each b (a decoding step's positions:
// one captured CUDA graph serves every step). The CPU rejects positions
// past the table; CUDA adds nothing there.
void position_add_at(const TensorView& x, const TensorView& table, const TensorView& offset,
                     const Stream& stream);

// dtable[offset + t, :] += sum_b dx[b, t, :]            dx (B, T, D), dtable (P, D) +=
void position_backward(const TensorView& dx, int64_t offset, const TensorView& dtable,
                       const Stream& stream);

// --------------------------------------------------------------------- dropout
// keep_i = uniform01(philox_bits(key, i)) >= p, i the flat element index.
// The mask is never stored: backward recomputes it from the key, and a CPU
// and a GPU run with the same key drop the same elements. p in [0, 1).

// y = x * keep / (1 - p)                               (y =; y may be x; p = 0 copies)
void dropout_forward(const TensorView& x, float p, const RngKey& key, const TensorView& y,
                     const Stream& stream);

// dx = dy * keep / (1 - p)                             (dx =; dx may be dy)
void dropout_backward(const TensorView& dy, float p, const RngKey& key, const TensorView& dx,
                      const Stream& stream);

// Attention-weight dropout over padded tiles. x and y are (G, Tp, Sp) and
// hold the weights of a (G, T, S) tile in their top-left corners (T <= Tp,
// S <= Sp; CUDA pads attention to multiples of 8 for aligned GEMMs, the CPU
// does not pad). Element (g, i, j) is kept as dropout keeps element
// (g T + i) S + j of the unpadded tile, so a padded and an unpadded run drop
// the same weights; with Tp = T and Sp = S this is dropout_forward.
//   y = x * keep / (1 - p) in the corner, 0 in the padding   (y =; y may be x)
// Backward is the same map applied to dy (same key, same mask).
void attention_dropout(const TensorView& x, int64_t t, int64_t s, float p, const RngKey& key,
                       const TensorView& y, const Stream& stream);

// Pre-norm residual: y = residual + dropout(s)          (y =; y may be residual)
// Its backward: the residual's gradient is dy itself; ds = dropout_backward(dy).
void add_dropout_forward(const TensorView& residual, const TensorView& s, float p,
                         const RngKey& key, const TensorView& y, const Stream& stream);

// ------------------------------------------------------------------- layernorm
// Over the last dimension D of (R, D); mean and rstd = 1 / sqrt(var + eps)
// (biased variance) are (R) in f32 (f64 when x is f64), saved for backward.
// gamma and beta are (D), of x's dtype or (on CUDA) f32.

// y = gamma * (x - mean) * rstd + beta                 (y =, mean =, rstd =)
void layernorm_forward(const TensorView& x, const TensorView& gamma, const TensorView& beta,
                       float eps, const TensorView& y, const TensorView& mean,
                       const TensorView& rstd, const Stream& stream);

// xhat = (x - mean) * rstd, g = gamma * dy:
// dx = rstd * (g - mean_D(g) - xhat * mean_D(g * xhat))      (dx =; dx may be dy)
// dgamma += sum_R dy * xhat;  dbeta += sum_R dy
void layernorm_backward(const TensorView& x, const TensorView& gamma, const TensorView& mean,
                        const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                        const TensorView& dgamma, const TensorView& dbeta, const Stream& stream);

// The post-norm sub-layer end, fused: h = residual + dropout(s); y = LayerNorm(h)
// residual, s, h, y (R, D); saves h, mean, rstd          (h =, y =, mean =, rstd =)
void add_dropout_layernorm_forward(const TensorView& residual, const TensorView& s, float p,
                                   const RngKey& key, const TensorView& gamma,
                                   const TensorView& beta, float eps, const TensorView& h,
                                   const TensorView& y, const TensorView& mean,
                                   const TensorView& rstd, const Stream& stream);

// Its backward: dh = layer-norm backward of dy (the residual's gradient),
// ds = dropout_backward(dh)            (dh =, ds =; dgamma +=, dbeta +=; dh may be dy)
void add_dropout_layernorm_backward(const TensorView& h, const TensorView& gamma,
                                    const TensorView& mean, const TensorView& rstd,
                                    const TensorView& dy, float p, const RngKey& key,
                                    const TensorView& dh, const TensorView& ds,
                                    const TensorView& dgamma, const TensorView& dbeta,
                                    const Stream& stream);

// ---------------------------------------------------------- reduce: reductions

// out[n] += sum_r x[r, n]                               x (R, N), out (N) +=  (bias grads)
void sum_rows(const TensorView& x, const TensorView& out, const Stream& stream);

// out[0] = sum_i x[i]^2                                 x any shape, out (1) f32 (f64 for f64) =
void sum_squares(const TensorView& x, const TensorView& out, const Stream& stream);

// x *= alpha                                            (in place)
void scale(const TensorView& x, float alpha, const Stream& stream);

// ------------------------------------------------------------------- attention

// y[a, c, b, d] = x[a, b, c, d]                         x (A, B, C, D), y (A, C, B, D) =
// Splits heads, (B, T, H, K) -> (B, H, T, K), and merges them back.
void permute_0213(const TensorView& x, const TensorView& y, const Stream& stream);

// Packed rows <-> padded heads. The model keeps token rows packed: sentence
// b owns rows [offsets[b], offsets[b + 1]) of rows (N, W), len_b of them,
// len_b <= L, N = offsets[B]; attention wants heads (B, H, L, X). The heads
// are columns [col, col + H X) of the rows (W >= col + H X), so one fused
// projection's (N, 3 H X) rows hold the queries, keys and values side by
// side. offsets (B + 1) i32, non-decreasing from 0 (checked where they are
// made). With c = col + h X:
// heads[b, h, t, :] = t < len_b ? rows[offsets[b] + t, c : c + X] : 0      (heads =)
void unpack_heads(const TensorView& rows, const TensorView& offsets, const TensorView& heads,
                  const Stream& stream, int64_t col = 0);
// rows[offsets[b] + t, c : c + X] = heads[b, h, t, :], t < len_b;           (rows =)
// heads at t >= len_b are not read; the other columns of rows are not written.
void pack_heads(const TensorView& heads, const TensorView& offsets, const TensorView& rows,
                const Stream& stream, int64_t col = 0);

// probs[b, h, i, :] = softmax over the keys j that query i of sentence b may
// see: j < k_lengths[b] and, when causal, j <= i. Hidden keys get 0; a row
// that sees no key is all 0.
// scores, probs (B, H, Tq, Tk) (probs =; may alias scores); k_lengths (B) i32
void masked_softmax_forward(const TensorView& scores, const TensorView& k_lengths, bool causal,
                            const TensorView& probs, const Stream& stream);

// dscores = probs * (dprobs - sum_j probs * dprobs)      (dscores =; may alias dprobs)
void masked_softmax_backward(const TensorView& probs, const TensorView& dprobs,
                             const TensorView& dscores, const Stream& stream);

// ------------------------------------------------------ loss: the output layer

// y = log_softmax(x) over the last dimension            x, y (N, V) (y =; may alias)
void log_softmax(const TensorView& x, const TensorView& y, const Stream& stream);

// Label-smoothed cross-entropy over rows of logits (N, V), forward and
// backward at once, in place. For a row n with target t = targets[n] >= 0:
//   logp = log_softmax(logits[n])
//   loss_n = (1 - eps) * -logp[t] + eps * mean_v(-logp[v])   (PyTorch's label_smoothing)
//   logits[n, :] := grad_scale * (softmax(logits[n]) - (1 - eps) * onehot(t) - eps / V)
// A row with t < 0 (padding) adds nothing and gets zeros. targets (N) i32.
// sums (2) f32 (f64 for f64 logits) += {sum_n loss_n, sum_n -logp[t]}
// dlogits (N, V): where the gradient goes instead of logits (logits is then
// only read), on CUDA in any float dtype: a 16-bit dlogits is what the
// output layer's backward GEMMs read, written in the same pass that reads
// the logits (no separate cast). Empty: in place, as above.
void smoothed_cross_entropy(const TensorView& logits, const TensorView& targets, float eps,
                            float grad_scale, const TensorView& sums, const Stream& stream,
                            const TensorView& dlogits = {});

// ------------------------------------------------------------ decode: decoding
// The inference path (libcore/decode, tfm-decode). Each op computes every
// row alone and in a fixed order, so a row's result does not depend on the
// other rows of the call, on their number or on the thread count (batch
// invariance; the GEMMs with GemmOptions::row_invariant).

// Attention of query rows over keys and values gathered from pools. Row n
// reads the key list g = groups[n]: pool rows index[g, j] for j < lengths[g].
//   s_j = scale * q[n, h, :] . keys[index[g, j], h, :]
//   p = softmax_j(s);   out[n, h, :] = sum_j p_j * values[index[g, j], h, :]
// q (N, H, K); keys (P, H, K); values (P, H, E); index (G, L) i32 in [0, P);
// lengths (G) i32 in [0, L]; groups (N) i32 in [0, G);
// out (N, H, E) =;  probs (N, H, L) = p_j, 0 past the length (optional: an
// empty view). A row whose list is empty gets out = 0. Pools are how the
// decoder avoids copies: a beam's self-attention cache is read through its
// history of pool rows, and a sentence's cross-attention keys are shared by
// its beams (one group). dtypes: q, keys, values, out alike (CPU f32 or f64;
// CUDA f32, bf16 or f16, accumulating in f32); probs f32 (f64 for f64).
void attention_gather(const TensorView& q, const TensorView& keys, const TensorView& values,
                      const TensorView& index, const TensorView& lengths,
                      const TensorView& groups, float scale, const TensorView& out,
                      const TensorView& probs, const Stream& stream);

// The self-attention lists of a decoding step: row r, at position
// p = positions[r] of its sentence, continues row parents[r] of the last
// step, so it attends to its parent's first p pool rows, then to its own
// new one, pool row slots[r]:
//   next[r, j] = prev[parents[r], j]   (j < p)
//   next[r, p] = slots[r];  lengths[r] = p + 1
// A row at position 0 (a sentence's first) reads no parent. Rows of one
// step may be at different positions (sentences join a batch as others
// leave it); the positions and slots are read when the work runs, so one
// captured CUDA graph serves every step (scatter_columns then writes the
// step's keys and values to the slots).
// prev (R, T) i32 (rows past the last step's are not read); next (R', T)
// i32, R' >= N, not prev (a slice of the step's lists: the decoder's
// threads extend their own rows); parents, positions, slots (N) i32 on the
// tensors' device; lengths (N) i32 =. The CPU rejects a position outside
// [0, T) and, past position 0, a parent outside [0, R); CUDA writes
// nothing for such a position and an empty list (-1s) for such a parent.
// The lists stay on the device from step to step: only the rows' parents,
// positions and slots go up.
void extend_history(const TensorView& prev, const TensorView& parents, const TensorView& positions,
                    const TensorView& slots, const TensorView& next, const TensorView& lengths,
                    const Stream& stream);

// The k most likely next tokens of each row of logits, and its normalizer:
//   lse[n] = log sum_v exp(logits[n, v])
//   ids[n, :] = the k largest logits of row n, largest first (ties: smaller id first)
//   values[n, i] = logits[n, ids[n, i]] - lse[n]          (log-probabilities)
// logits (N, V); values (N, k) =; ids (N, k) i32 =; lse (N) =; 1 <= k <= V.
// values and lse are f32 (f64 for f64 logits); logits as log_softmax takes them.
// What a beam search needs of a step, without (N, V) log-probabilities.
void log_softmax_topk(const TensorView& logits, const TensorView& values, const TensorView& ids,
                      const TensorView& lse, const Stream& stream);

// ------------------- gemm_int8: int8 inference (CPU; quantize_int8 in ops.cc)
// Inference with 8-bit weights on the CPU (tfm-decode and tfm-score
// --precision int8; libcore/model/int8.h quantizes the model's). A matrix
// quantized by rows: row j is values[j, :] * scales[j], the values in
// [-127, 127], each row padded with zeros to ld, a multiple of kInt8RowAlign;
// sums[j] = sum_p values[j, p] (gemm_int8's AVX2 path needs them).
constexpr int64_t kInt8RowAlign = 32;
constexpr int kInt8InputLimit = 63;  // gemm_int8's x: quantized to [-63, 63]
struct Int8Matrix {
  const int8_t* values = nullptr;  // (rows, ld)
  const float* scales = nullptr;   // (rows)
  const int32_t* sums = nullptr;   // (rows)
  int64_t rows = 0, cols = 0, ld = 0;
  const int32_t* panels = nullptr;  // optional: the values as pack_int8_panels laid them out,
                                    // read instead of copying them into panels each call
};
inline int64_t int8_ld(int64_t cols) { return (cols + kInt8RowAlign - 1) / kInt8RowAlign * kInt8RowAlign; }

// gemm_int8 copies W's rows into panels of 16 as the float GEMM does, four
// bytes of a row as one 32-bit element. Weights quantized once can be laid
// out so once: values (R, ld) into panels (panels_floats(R, ld / 4) int32s,
// the last panel's rows past R zero), then Int8Matrix::panels: the same
// bits without the copy (rows [r0, r0 + n): panels + r0 ld / 4, r0 a
// multiple of kPanelRows).
void pack_int8_panels(const int8_t* values, int64_t rows, int64_t ld, int32_t* panels);

// The rows of w (R, C), f32 on the CPU, into values (R * ld), scales (R)
// and sums (R):
//   scales[j] = max_p |w[j, p]| / 127
//   values[j, p] = round(w[j, p] * 127 / max_p |w[j, p]|)   (to nearest, ties to even)
//   sums[j] = sum_p values[j, p]
// A zero row gets scale 0, a row with an inf or NaN scale NaN; padding is 0.
void quantize_int8(const TensorView& w, int8_t* values, int64_t ld, float* scales, int32_t* sums);

// y = act(x W^T + bias), x quantized by rows on the way, to kInt8InputLimit
// (W's rows go to 127):
//   sx[i] = max_p |x[i, p]| / 63,  qx[i, p] = round(x[i, p] * 63 / max_p |x[i, p]|)
//   y[i, j] = float(sum_p qx[i, p] qw[j, p]) * (sx[i] * sw[j]) + bias[j]   (then ReLU)
// the sum exact in int32, the rest in f32 in that order. Why 63: AVX2
// multiplies bytes only unsigned by signed (vpmaddubsw, two products summed
// in int16), so the AVX2 path feeds qx + 64 (in [1, 127]: a pair stays
// within int16) and takes 64 sums[j] back off, exactly; at 127 it would
// spend a third instruction a product on moving x's sign onto W. The BLEU
// of trained models is the same as with 127 (docs/benchmarks.md, int8).
// x (M, K) f32 on the CPU; w (N, K), K < 2^17; y (M, N) f32 =; bias (N)
// f32, optional. A row of y depends on its row of x alone, bit for bit (any
// M, any thread count, with AVX2 or without): batch invariance, as
// row_invariant's GEMM.
void gemm_int8(const TensorView& x, const Int8Matrix& w, const TensorView& y, const Stream& stream,
               const TensorView& bias = {}, bool relu = false);

// --------------------------------------------------------- adam: the optimizer

struct AdamOptions {
  float lr = 0;
  float beta1 = 0.9f, beta2 = 0.98f, eps = 1e-9f;  // the paper's
  int64_t step = 1;          // 1-based, for bias correction
  float grad_scale = 1.0f;   // multiplies every gradient first (clipping, loss scale)
};

// One pass over the flat buffers (P), in place:
//   g = grad_scale * grads;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   params -= lr * (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps)
// params, grads, m, v: f32 (f64 on the CPU for tests), one shape.
// control: update_control's decision, on the device (optional: an empty
// view). When given, its grad_scale, lr and bias corrections replace the
// options' (their lr, step and grad_scale are not read), and an update it
// does not apply leaves params, m and v as they were.
void adam_step(const TensorView& params, const TensorView& grads, const TensorView& m,
               const TensorView& v, const AdamOptions& options, const Stream& stream,
               const TensorView& control = {});

// What the schedule gives one update number: the learning rate and Adam's
// bias corrections 1 - beta^step, in double (adam_step rounds them to its
// dtype once, as it does with the values it computes from AdamOptions).
struct AdamSchedule {
  double lr = 0, bias1 = 1, bias2 = 1;
};
AdamSchedule adam_schedule(double lr, float beta1, float beta2, int64_t step);

// The clipping rule, one for host and device: the factor that brings a
// gradient of norm `norm` down to `max_norm` (1 when it is within it, or
// when max_norm <= 0: no clipping), computed in double, rounded to float.
TFM_HD float clip_factor(double norm, double max_norm) {
  if (max_norm <= 0 || !(norm > max_norm)) return 1.0f;
  return static_cast<float>(max_norm / (norm + 1e-6));
}

// An update's decision, made where its sums are, so the host can queue the
// optimizer step (and the next update) without reading them:
//   sums (3) = {loss, nll, sum of the gradient's squares}: f32 (f64 for f64)
//   norm = sqrt(sum) / loss_scale                     (the gradient's own norm)
//   applied = loss, nll and norm are all finite
//   grad_scale = clip_factor(norm, max_norm) / loss_scale
//   schedule = control[0] as found (1: the update before was applied) ? next : retry
// control (5) = {applied, grad_scale, schedule.lr, schedule.bias1,
// schedule.bias2}, of the sums' dtype, all in double and rounded once, as
// the host would. The
// two schedules let an update take its number from an outcome the host has
// not read yet (libcore/train/step.h).
void update_control(const TensorView& sums, double loss_scale, double max_norm,
                    const AdamSchedule& next, const AdamSchedule& retry,
                    const TensorView& control, const Stream& stream);
inline constexpr int64_t kUpdateControlSize = 5;

// ------------------------------------------- memory outside the plans (ops.cc)
// Memory an op's library takes for itself, beside tfm's memory plans: on
// the CPU, OpenBLAS maps a GEMM buffer of 128 MiB for each thread that runs
// GEMMs, on its first one, and keeps it. 0 on CUDA (the workspaces of
// cuBLAS and cuBLASLt are planned).
size_t library_memory_bytes(Device device);
// Makes sure, before the first op, that that memory can still be had:
// OpenBLAS retries a failed mmap forever, so a process short of address
// space (ulimit -v) would hang in its first GEMM, deaf to SIGTERM. Maps and
// unmaps that much (and a margin for the threads' stacks) once; Error "out
// of memory: ..." saying how much is missing otherwise.
void check_library_memory(Device device);

}  // namespace tfm::ops
