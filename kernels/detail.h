// What kernels/ops.cc hands the device implementations once a call has been
// validated: shapes reduced to numbers. Not part of the op catalogue.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ops.h"

namespace tfm::ops::detail {

// One (batched, strided) row-major GEMM: C[g] = op(A[g]) op(B[g]), M x N x K.
// A stride of 0 means every batch entry shares one matrix.
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;                 // row pitch, in elements
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // matrix pitch, in elements
};

// update_control's arithmetic (ops.h), one copy for both devices: the
// decision from the sums as doubles. TFM_HD: host and device.
struct UpdateDecision {
  float applied, grad_scale;
};
TFM_HD UpdateDecision decide_update(double loss, double nll, double squares, double loss_scale,
                                    double max_norm) {
  const double norm = std::sqrt(squares) / loss_scale;
  const bool finite = std::isfinite(loss) && std::isfinite(nll) && std::isfinite(norm);
  if (!finite) return {0.0f, 0.0f};
  return {1.0f, static_cast<float>(static_cast<double>(clip_factor(norm, max_norm)) / loss_scale)};
}

}  // namespace tfm::ops::detail

namespace tfm::ops::cpu {
using detail::GemmShape;
void gemm(const GemmShape& s, const TensorView& a, const TensorView& b, const TensorView& c,
          const TensorView& bias, const GemmOptions& o);
void add(const TensorView& a, const TensorView& b, const TensorView& y);
void relu_forward(const TensorView& x, const TensorView& y);
void relu_backward(const TensorView& y, const TensorView& dy, const TensorView& dx);
void uniform(const TensorView& out, const RngKey& key, float lo, float hi);
void cast(const TensorView& x, const TensorView& y);
void copy_columns(const TensorView& x, int64_t col, const TensorView& y);
void scatter_columns(const TensorView& x, int64_t col, const TensorView& index, const TensorView& y);
void embedding_forward(const TensorView& ids, const TensorView& table, float scale,
                       const TensorView& out);
void embedding_backward(const TensorView& ids, const TensorView& dout, float scale,
                        const TensorView& dtable);
void position_add(const TensorView& x, const TensorView& table, int64_t offset);
void position_backward(const TensorView& dx, int64_t offset, const TensorView& dtable);
void dropout_forward(const TensorView& x, float p, const RngKey& key, const TensorView& y);
void dropout_backward(const TensorView& dy, float p, const RngKey& key, const TensorView& dx);
void attention_dropout(const TensorView& x, int64_t t, int64_t s, float p, const RngKey& key,
                       const TensorView& y);
void layernorm_forward(const TensorView& x, const TensorView& gamma, const TensorView& beta,
                       float eps, const TensorView& y, const TensorView& mean,
                       const TensorView& rstd);
void layernorm_backward(const TensorView& x, const TensorView& gamma, const TensorView& mean,
                        const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                        const TensorView& dgamma, const TensorView& dbeta);
void add_dropout_layernorm_forward(const TensorView& residual, const TensorView& s, float p,
                                   const RngKey& key, const TensorView& gamma,
                                   const TensorView& beta, float eps, const TensorView& h,
                                   const TensorView& y, const TensorView& mean,
                                   const TensorView& rstd);
void add_dropout_layernorm_backward(const TensorView& h, const TensorView& gamma,
                                    const TensorView& mean, const TensorView& rstd,
                                    const TensorView& dy, float p, const RngKey& key,
                                    const TensorView& dh, const TensorView& ds,
                                    const TensorView& dgamma, const TensorView& dbeta);
void add_dropout_forward(const TensorView& residual, const TensorView& s, float p,
                         const RngKey& key, const TensorView& y);
void sum_rows(const TensorView& x, const TensorView& out);
void sum_squares(const TensorView& x, const TensorView& out);
void scale(const TensorView& x, float alpha);
void permute_0213(const TensorView& x, const TensorView& y);
void unpack_heads(const TensorView& rows, const TensorView& offsets, const TensorView& heads,
                  int64_t col);
void pack_heads(const TensorView& heads, const TensorView& offsets, const TensorView& rows,
                int64_t col);
void masked_softmax_forward(const TensorView& scores, const TensorView& k_lengths, bool causal,
                            const TensorView& probs);
void masked_softmax_backward(const TensorView& probs, const TensorView& dprobs, const TensorView& dscores);
void log_softmax(const TensorView& x, const TensorView& y);
void smoothed_cross_entropy(const TensorView& logits, const TensorView& targets, float eps,
                            float grad_scale, const TensorView& sums, const TensorView& dlogits);
void adam_step(const TensorView& params, const TensorView& grads, const TensorView& m,
               const TensorView& v, const AdamOptions& options, const TensorView& control);
void update_control(const TensorView& sums, double loss_scale, double max_norm,
                    const AdamSchedule& next, const AdamSchedule& retry, const TensorView& control);
void attention_gather(const TensorView& q, const TensorView& keys, const TensorView& values,
                      const TensorView& index, const TensorView& lengths,
                      const TensorView& groups, float scale, const TensorView& out,
                      const TensorView& probs);
void log_softmax_topk(const TensorView& logits, const TensorView& values, const TensorView& ids,
                      const TensorView& lse);
void extend_history(const TensorView& prev, const TensorView& parents, const TensorView& positions,
                    const TensorView& slots, const TensorView& next, const TensorView& lengths);
// gemm with row_invariant (cpu/gemm_rows.cc): C = act(alpha A B^T + beta C +
// bias) for one A (M, K) and one B (N, K), by `path`: every path gives the
// same bits (tests compare them); one the CPU lacks runs as the best it
// has below it. f64 runs the portable path.
enum class RowGemmPath { portable, avx2, avx512, best };
template <typename T>
void gemm_row_invariant(const GemmShape& s, const T* a, const T* b, T* c, const T* bias,
                        const GemmOptions& o, RowGemmPath path = RowGemmPath::best);
RowGemmPath gemm_row_invariant_path();  // the path `best` takes on this CPU (never best)
// W (rows, cols) f32 as gemm_row_invariant's panels (GemmOptions::packed_b),
// panels_size(rows, cols) floats: 16 rows a panel, the last padded with zeros.
int64_t panels_size(int64_t rows, int64_t cols);
void pack_panels(const float* w, int64_t rows, int64_t cols, float* out);
const char* row_gemm_path_name(RowGemmPath path);  // "AVX-512", "AVX2", "portable"
// int8 (cpu/gemm_int8.cc): y = act(x W^T + bias) for x (m, K) f32 with row
// pitch ldx, y with ldy, by `path` (AVX-512: with BW): every path gives the
// same bits; one the CPU lacks runs as the best it has below it.
void gemm_int8(const float* x, int64_t m, int64_t ldx, const Int8Matrix& w, float* y, int64_t ldy,
               const float* bias, bool relu, RowGemmPath path = RowGemmPath::best);
RowGemmPath gemm_int8_path();  // the path `best` takes on this CPU: at most gemm_row_invariant_path()'s
// W's quantized rows (rows, ld) as gemm_int8's panels (Int8Matrix::panels),
// panels_size(rows, ld / 4) int32s.
void pack_int8_panels(const int8_t* values, int64_t rows, int64_t ld, int32_t* panels);
// One row of n values into q (ld bytes, zero past n), in [-limit, limit];
// returns its scale, max |v| / limit (ops.h, quantize_int8; gemm_int8's rows
// of x: kInt8InputLimit). simd false: the portable path, the same bits.
float quantize_row_int8(const float* v, int64_t n, int8_t* q, int64_t ld, bool simd = true, int limit = 127);
}  // namespace tfm::ops::cpu

namespace tfm::ops::cuda {
using detail::GemmShape;
void gemm(const GemmShape& s, const TensorView& a, const TensorView& b, const TensorView& c,
          const TensorView& bias, const GemmOptions& o, const Stream& stream);
void add(const TensorView& a, const TensorView& b, const TensorView& y, const Stream& stream);
void relu_forward(const TensorView& x, const TensorView& y, const Stream& stream);
void relu_backward(const TensorView& y, const TensorView& dy, const TensorView& dx,
                   const Stream& stream);
void uniform(const TensorView& out, const RngKey& key, float lo, float hi, const Stream& stream);
void cast(const TensorView& x, const TensorView& y, const Stream& stream);
void copy_columns(const TensorView& x, int64_t col, const TensorView& y, const Stream& stream);
void scatter_columns(const TensorView& x, int64_t col, const TensorView& index, const TensorView& y,
                     const Stream& stream);
void embedding_forward(const TensorView& ids, const TensorView& table, float scale,
                       const TensorView& out, const Stream& stream);
void embedding_backward(const TensorView& ids, const TensorView& dout, float scale,
                        const TensorView& dtable, const Stream& stream);
void position_add(const TensorView& x, const TensorView& table, int64_t offset,
                  const Stream& stream);
void position_add_at(const TensorView& x, const TensorView& table, const TensorView& offset,
                     const Stream& stream);
void position_backward(const TensorView& dx, int64_t offset, const TensorView& dtable,
                       const Stream& stream);
void dropout_forward(const TensorView& x, float p, const RngKey& key, const TensorView& y,
                     const Stream& stream);
void dropout_backward(const TensorView& dy, float p, const RngKey& key, const TensorView& dx,
                      const Stream& stream);
void attention_dropout(const TensorView& x, int64_t t, int64_t s, float p, const RngKey& key,
                       const TensorView& y, const Stream& stream);
void layernorm_forward(const TensorView& x, const TensorView& gamma, const TensorView& beta,
                       float eps, const TensorView& y, const TensorView& mean,
                       const TensorView& rstd, const Stream& stream);
void layernorm_backward(const TensorView& x, const TensorView& gamma, const TensorView& mean,
                        const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                        const TensorView& dgamma, const TensorView& dbeta, const Stream& stream);
void add_dropout_layernorm_forward(const TensorView& residual, const TensorView& s, float p,
                                   const RngKey& key, const TensorView& gamma,
                                   const TensorView& beta, float eps, const TensorView& h,
                                   const TensorView& y, const TensorView& mean,
                                   const TensorView& rstd, const Stream& stream);
void add_dropout_layernorm_backward(const TensorView& h, const TensorView& gamma,
                                    const TensorView& mean, const TensorView& rstd,
                                    const TensorView& dy, float p, const RngKey& key,
                                    const TensorView& dh, const TensorView& ds,
                                    const TensorView& dgamma, const TensorView& dbeta,
                                    const Stream& stream);
void add_dropout_forward(const TensorView& residual, const TensorView& s, float p,
                         const RngKey& key, const TensorView& y, const Stream& stream);
void sum_rows(const TensorView& x, const TensorView& out, const Stream& stream);
void sum_squares(const TensorView& x, const TensorView& out, const Stream& stream);
void scale(const TensorView& x, float alpha, const Stream& stream);
void permute_0213(const TensorView& x, const TensorView& y, const Stream& stream);
void unpack_heads(const TensorView& rows, const TensorView& offsets, const TensorView& heads,
                  int64_t col, const Stream& stream);
void pack_heads(const TensorView& heads, const TensorView& offsets, const TensorView& rows,
                int64_t col, const Stream& stream);
void masked_softmax_forward(const TensorView& scores, const TensorView& k_lengths, bool causal,
                            const TensorView& probs, const Stream& stream);
void masked_softmax_backward(const TensorView& probs, const TensorView& dprobs, const TensorView& dscores,
                             const Stream& stream);
void log_softmax(const TensorView& x, const TensorView& y, const Stream& stream);
void smoothed_cross_entropy(const TensorView& logits, const TensorView& targets, float eps,
                            float grad_scale, const TensorView& sums, const TensorView& dlogits,
                            const Stream& stream);
void adam_step(const TensorView& params, const TensorView& grads, const TensorView& m,
               const TensorView& v, const AdamOptions& options, const TensorView& control,
               const Stream& stream);
void update_control(const TensorView& sums, double loss_scale, double max_norm,
                    const AdamSchedule& next, const AdamSchedule& retry, const TensorView& control,
                    const Stream& stream);
void attention_gather(const TensorView& q, const TensorView& keys, const TensorView& values,
                      const TensorView& index, const TensorView& lengths,
                      const TensorView& groups, float scale, const TensorView& out,
                      const TensorView& probs, const Stream& stream);
void log_softmax_topk(const TensorView& logits, const TensorView& values, const TensorView& ids,
                      const TensorView& lse, const Stream& stream);
void extend_history(const TensorView& prev, const TensorView& parents, const TensorView& positions,
                    const TensorView& slots, const TensorView& next, const TensorView& lengths,
                    const Stream& stream);
}  // namespace tfm::ops::cuda
