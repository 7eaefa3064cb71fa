// Validation and the one dispatch switch of every op (ops.h). Checks that do
// not depend on the device live here, so CPU and CUDA agree on what is legal.
#include "kernels/ops.h"

#include <cmath>
#include <initializer_list>

#include "kernels/cpu/blas.h"
#include "kernels/detail.h"

namespace tfm::ops {
namespace {

// The CUDA side of a dispatch: the stream's device is made current first,
// here and nowhere else, so an op on cuda:1 never runs on device 0.
#ifdef TFM_WITH_CUDA
#define TFM_CUDA_DISPATCH(call) \
  do {                          \
    activate(stream.device());  \
    return cuda::call;          \
  } while (0)
#else
#define TFM_CUDA_DISPATCH(call) fail("unsupported device: cuda (built without CUDA)")
#endif

// Every tensor of a call lives where its stream runs.
void require_device(const char* op, const Stream& stream,
                    std::initializer_list<std::pair<const char*, const TensorView*>> tensors) {
  for (const auto& [name, t] : tensors) {
    if (t->empty() && t->numel() != 0) fail("{}: {} has no data", op, name);
    TFM_REQUIRE(t->device() == stream.device(), "{}: {} is on {} but the stream runs on {}", op,
                name, t->device().str(), stream.device().str());
  }
}

bool float_dtype_ok(DType t, Device d) {
  if (d.is_cpu()) return t == DType::f32 || t == DType::f64;
  return t == DType::f32 || t == DType::bf16 || t == DType::f16;
}

void require_float(const char* op, const TensorView& t, const char* name) {
  TFM_REQUIRE(float_dtype_ok(t.dtype(), t.device()), "{}: {} is {}, which {} does not support on {}",
              op, name, dtype_name(t.dtype()), op, t.device().is_cpu() ? "the cpu" : "cuda");
}

void require_same(const char* op, const TensorView& a, const char* an, const TensorView& b,
                  const char* bn) {
  TFM_REQUIRE(a.shape() == b.shape() && a.dtype() == b.dtype(), "{}: {} is {} but {} is {}", op,
              an, a.str(), bn, b.str());
}

// Batch count of a (G..., R, C) tensor: the product of its leading dims.
int64_t batch_of(const TensorView& t) {
  int64_t g = 1;
  for (int i = 0; i + 2 < t.rank(); ++i) g *= t.dim(i);
  return g;
}

// Rows of an (R..., C) tensor: the product of every dimension but the last.
int64_t rows_of(const TensorView& t) {
  int64_t r = 1;
  for (int i = 0; i + 1 < t.rank(); ++i) r *= t.dim(i);
  return r;
}

void require_shape(const char* op, const TensorView& t, const char* name, const Shape& want,
                   const char* what) {
  TFM_REQUIRE(t.shape() == want, "{}: {} is {} but must be {} ({})", op, name, t.str(),
              want.str(), what);
}

void require_i32(const char* op, const TensorView& t, const char* name) {
  TFM_REQUIRE(t.dtype() == DType::i32, "{}: {} is {} but must be i32", op, name,
              dtype_name(t.dtype()));
}

// A parameter or parameter gradient beside activation x: x's dtype, or f32
// on CUDA (fp32 master weights with bf16/f16 activations, ops.h).
void require_param(const char* op, const TensorView& t, const char* name, const TensorView& x,
                   const char* xname) {
  TFM_REQUIRE(t.dtype() == x.dtype() || (x.device().is_cuda() && t.dtype() == DType::f32),
              "{}: {} is {} but {} is {} ({} must match it{})", op, name, dtype_name(t.dtype()),
              xname, dtype_name(x.dtype()), name, x.device().is_cuda() ? " or be f32" : "");
}

// Saved statistics and sums: stats_dtype (ops.h).
void require_stat(const char* op, const TensorView& t, const char* name, const TensorView& x,
                  const char* xname) {
  const DType want = stats_dtype(x.dtype());
  TFM_REQUIRE(t.dtype() == want, "{}: {} is {} but must be {} for {} {}", op, name,
              dtype_name(t.dtype()), dtype_name(want), dtype_name(x.dtype()), xname);
}

void require_p(const char* op, float p) {
  TFM_REQUIRE(p >= 0.0f && p < 1.0f, "{}: dropout probability p = {} is outside [0, 1)", op, p);
}

// A layer-norm call: x (R, D) with D > 0, gamma and beta (D), mean and rstd (R).
void require_layernorm(const char* op, const TensorView& x, const char* xname,
                       const TensorView& gamma, const TensorView* beta, const TensorView& mean,
                       const TensorView& rstd) {
  require_float(op, x, xname);
  TFM_REQUIRE(x.rank() >= 2 && x.dim(-1) > 0, "{}: {} is {} but must be (R, D) with D > 0", op,
              xname, x.str());
  const Shape d{x.dim(-1)}, r{rows_of(x)};
  require_shape(op, gamma, "gamma", d, "D");
  require_param(op, gamma, "gamma", x, xname);
  if (beta) {
    require_shape(op, *beta, "beta", d, "D");
    require_param(op, *beta, "beta", x, xname);
  }
  require_shape(op, mean, "mean", r, "R");
  require_shape(op, rstd, "rstd", r, "R");
  require_stat(op, mean, "mean", x, xname);
  require_stat(op, rstd, "rstd", x, xname);
}

}  // namespace

void gemm(const TensorView& a, const TensorView& b, const TensorView& c, const GemmOptions& o,
          const Stream& stream, const TensorView& bias) {
  require_device("gemm", stream, {{"A", &a}, {"B", &b}, {"C", &c}});
  TFM_REQUIRE(a.rank() >= 2 && b.rank() >= 2 && c.rank() >= 2,
              "gemm: A, B and C must be matrices or batches of them, got {}, {} and {}",
              a.shape().str(), b.shape().str(), c.shape().str());
  detail::GemmShape s;
  s.m = o.trans_a ? a.dim(-1) : a.dim(-2);
  s.k = o.trans_a ? a.dim(-2) : a.dim(-1);
  const int64_t kb = o.trans_b ? b.dim(-1) : b.dim(-2);
  s.n = o.trans_b ? b.dim(-2) : b.dim(-1);
  TFM_REQUIRE(kb == s.k, "gemm: op(A) is {} x {} but op(B) is {} x {} (A {}{}, B {}{})", s.m, s.k,
              kb, s.n, a.shape().str(), o.trans_a ? "^T" : "", b.shape().str(),
              o.trans_b ? "^T" : "");
  TFM_REQUIRE(s.k > 0, "gemm: the inner dimension K is 0 (A {}, B {})", a.shape().str(),
              b.shape().str());
  TFM_REQUIRE(c.dim(-2) == s.m && c.dim(-1) == s.n, "gemm: C is {} but op(A) op(B) is {} x {}",
              c.shape().str(), s.m, s.n);
  s.batch = batch_of(c);
  const int64_t ga = batch_of(a), gb = batch_of(b);
  TFM_REQUIRE(ga == s.batch || (a.rank() == 2), "gemm: A holds {} matrices but C holds {}", ga,
              s.batch);
  TFM_REQUIRE(gb == s.batch || (b.rank() == 2), "gemm: B holds {} matrices but C holds {}", gb,
              s.batch);
  s.lda = a.dim(-1);
  s.ldb = b.dim(-1);
  s.ldc = c.dim(-1);
  s.stride_a = a.rank() == 2 ? 0 : a.dim(-2) * a.dim(-1);
  s.stride_b = b.rank() == 2 ? 0 : b.dim(-2) * b.dim(-1);
  s.stride_c = s.m * s.n;

  require_float("gemm", a, "A");
  TFM_REQUIRE(b.dtype() == a.dtype(), "gemm: A is {} but B is {}", dtype_name(a.dtype()),
              dtype_name(b.dtype()));
  TFM_REQUIRE(c.dtype() == a.dtype() || (stream.device().is_cuda() && c.dtype() == DType::f32),
              "gemm: C is {} but A and B are {} (C must match them{})", dtype_name(c.dtype()),
              dtype_name(a.dtype()), stream.device().is_cuda() ? " or be f32" : "");
  if (!bias.empty()) {
    require_device("gemm", stream, {{"bias", &bias}});
    TFM_REQUIRE(bias.rank() == 1 && bias.dim(0) == s.n, "gemm: bias is {} but C has {} columns",
                bias.shape().str(), s.n);
    TFM_REQUIRE(bias.dtype() == c.dtype(), "gemm: bias is {} but C is {}", dtype_name(bias.dtype()),
                dtype_name(c.dtype()));
  }
  if (s.m == 0 || s.n == 0 || s.batch == 0) return;

  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::gemm(s, a, b, c, bias, o);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(gemm(s, a, b, c, bias, o, stream));
  }
}

int64_t panels_floats(int64_t rows, int64_t cols) { return cpu::panels_size(rows, cols); }

void pack_panels(const TensorView& w, float* panels) {
  TFM_REQUIRE(w.device().is_cpu() && w.dtype() == DType::f32 && w.rank() == 2,
              "pack_panels: w is {} {} on {}, but must be an f32 matrix on the CPU", dtype_name(w.dtype()),
              w.shape().str(), w.device().str());
  cpu::pack_panels(static_cast<const float*>(w.data()), w.dim(0), w.dim(1), panels);
}

void pack_int8_panels(const int8_t* values, int64_t rows, int64_t ld, int32_t* panels) {
  TFM_REQUIRE(rows >= 0 && ld > 0 && ld % kInt8RowAlign == 0,
              "pack_int8_panels: {} rows of {} bytes are not quantized rows", rows, ld);
  cpu::pack_int8_panels(values, rows, ld, panels);
}

void add(const TensorView& a, const TensorView& b, const TensorView& y, const Stream& stream) {
  require_device("add", stream, {{"a", &a}, {"b", &b}, {"y", &y}});
  require_float("add", a, "a");
  require_same("add", a, "a", b, "b");
  require_same("add", a, "a", y, "y");
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::add(a, b, y);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(add(a, b, y, stream));
  }
}

void relu_forward(const TensorView& x, const TensorView& y, const Stream& stream) {
  require_device("relu_forward", stream, {{"x", &x}, {"y", &y}});
  require_float("relu_forward", x, "x");
  require_same("relu_forward", x, "x", y, "y");
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::relu_forward(x, y);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(relu_forward(x, y, stream));
  }
}

void relu_backward(const TensorView& y, const TensorView& dy, const TensorView& dx,
                   const Stream& stream) {
  require_device("relu_backward", stream, {{"y", &y}, {"dy", &dy}, {"dx", &dx}});
  require_float("relu_backward", y, "y");
  require_same("relu_backward", y, "y", dy, "dy");
  require_same("relu_backward", y, "y", dx, "dx");
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::relu_backward(y, dy, dx);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(relu_backward(y, dy, dx, stream));
  }
}

void cast(const TensorView& x, const TensorView& y, const Stream& stream) {
  require_device("cast", stream, {{"x", &x}, {"y", &y}});
  for (const auto& [t, name] : {std::pair{&x, "x"}, std::pair{&y, "y"}}) {
    const bool ok = t->dtype() == DType::f32 || t->dtype() == DType::bf16 ||
                    t->dtype() == DType::f16 || (t->device().is_cpu() && t->dtype() == DType::f64);
    TFM_REQUIRE(ok, "cast: {} is {}, not a float dtype cast supports here", name, t->str());
  }
  TFM_REQUIRE(x.shape() == y.shape(), "cast: x is {} but y is {}", x.str(), y.str());
  if (x.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::cast(x, y);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(cast(x, y, stream));
  }
}

void copy_columns(const TensorView& x, int64_t col, const TensorView& y, const Stream& stream) {
  require_device("copy_columns", stream, {{"x", &x}, {"y", &y}});
  TFM_REQUIRE(x.rank() == 2 && y.rank() == 2, "copy_columns: x is {} and y is {}; both must be 2-D",
              x.str(), y.str());
  TFM_REQUIRE(x.dtype() == y.dtype(), "copy_columns: x is {} but y is {}", x.str(), y.str());
  TFM_REQUIRE(x.dim(0) == y.dim(0) && col >= 0 && col + y.dim(1) <= x.dim(1),
              "copy_columns: columns [{}, {}) of x {} into y {}", col, col + y.dim(1), x.str(), y.str());
  if (y.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::copy_columns(x, col, y);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(copy_columns(x, col, y, stream));
  }
}

void scatter_columns(const TensorView& x, int64_t col, const TensorView& index, const TensorView& y,
                     const Stream& stream) {
  const char* op = "scatter_columns";
  require_device(op, stream, {{"x", &x}, {"index", &index}, {"y", &y}});
  require_i32(op, index, "index");
  TFM_REQUIRE(x.rank() == 2 && y.rank() == 2, "{}: x is {} and y is {}; both must be 2-D", op,
              x.str(), y.str());
  TFM_REQUIRE(x.dtype() == y.dtype(), "{}: x is {} but y is {}", op, x.str(), y.str());
  TFM_REQUIRE(col >= 0 && col + y.dim(1) <= x.dim(1), "{}: columns [{}, {}) of x {} into y {}", op,
              col, col + y.dim(1), x.str(), y.str());
  require_shape(op, index, "index", Shape{x.dim(0)}, "R");
  if (x.dim(0) == 0 || y.dim(1) == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::scatter_columns(x, col, index, y);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(scatter_columns(x, col, index, y, stream));
  }
}

void uniform(const TensorView& out, const RngKey& key, float lo, float hi, const Stream& stream) {
  require_device("uniform", stream, {{"out", &out}});
  require_float("uniform", out, "out");
  TFM_REQUIRE(lo <= hi, "uniform: lo {} is above hi {}", lo, hi);
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::uniform(out, key, lo, hi);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(uniform(out, key, lo, hi, stream));
  }
}

// ---------------------------------------------------------------- embeddings

void embedding_forward(const TensorView& ids, const TensorView& table, float scale,
                       const TensorView& out, const Stream& stream) {
  const char* op = "embedding_forward";
  require_device(op, stream, {{"ids", &ids}, {"table", &table}, {"out", &out}});
  require_i32(op, ids, "ids");
  require_float(op, out, "out");
  TFM_REQUIRE(ids.rank() == 1, "{}: ids is {} but must be (N)", op, ids.str());
  TFM_REQUIRE(table.rank() == 2, "{}: table is {} but must be (V, D)", op, table.str());
  require_shape(op, out, "out", Shape{ids.dim(0), table.dim(1)}, "N, D");
  require_param(op, table, "table", out, "out");
  if (out.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::embedding_forward(ids, table, scale, out);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(embedding_forward(ids, table, scale, out, stream));
  }
}

void embedding_backward(const TensorView& ids, const TensorView& dout, float scale,
                        const TensorView& dtable, const Stream& stream) {
  const char* op = "embedding_backward";
  require_device(op, stream, {{"ids", &ids}, {"dout", &dout}, {"dtable", &dtable}});
  require_i32(op, ids, "ids");
  require_float(op, dout, "dout");
  TFM_REQUIRE(ids.rank() == 1, "{}: ids is {} but must be (N)", op, ids.str());
  TFM_REQUIRE(dtable.rank() == 2, "{}: dtable is {} but must be (V, D)", op, dtable.str());
  require_shape(op, dout, "dout", Shape{ids.dim(0), dtable.dim(1)}, "N, D");
  require_param(op, dtable, "dtable", dout, "dout");
  if (dout.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::embedding_backward(ids, dout, scale, dtable);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(embedding_backward(ids, dout, scale, dtable, stream));
  }
}

namespace {
// Shared by position_add and position_backward: x (B, T, D), table (P, D).
void require_position(const char* op, const TensorView& x, const char* xname,
                      const TensorView& table, const char* tname, int64_t offset) {
  require_float(op, x, xname);
  TFM_REQUIRE(x.rank() == 3, "{}: {} is {} but must be (B, T, D)", op, xname, x.str());
  TFM_REQUIRE(table.rank() == 2 && table.dim(1) == x.dim(2),
              "{}: {} is {} but must be (P, {}) to match {}", op, tname, table.str(), x.dim(2),
              xname);
  require_param(op, table, tname, x, xname);
  TFM_REQUIRE(offset >= 0 && offset + x.dim(1) <= table.dim(0),
              "{}: positions {} to {} are outside the table's {} rows", op, offset,
              offset + x.dim(1) - 1, table.dim(0));
}
}  // namespace

void position_add(const TensorView& x, const TensorView& table, int64_t offset,
                  const Stream& stream) {
  require_device("position_add", stream, {{"x", &x}, {"table", &table}});
  require_position("position_add", x, "x", table, "table", offset);
  if (x.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::position_add(x, table, offset);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(position_add(x, table, offset, stream));
  }
}

void position_add_at(const TensorView& x, const TensorView& table, const TensorView& offset,
                     const Stream& stream) {
  const char* op = "position_add_at";
  require_device(op, stream, {{"x", &x}, {"table", &table}, {"offset", &offset}});
  require_i32(op, offset, "offset");
  TFM_REQUIRE(x.rank() == 3, "{}: x is {} but must be (B, T, D)", op, x.str());
  TFM_REQUIRE(offset.shape() == Shape{1} || offset.shape() == Shape{x.dim(0)},
              "{}: offset is {} but must be (1) or (B) = ({})", op, offset.str(), x.dim(0));
  if (stream.device().is_cpu()) {  // the offsets are readable here: checked as position_add's
    const int32_t* at = offset.data_as<int32_t>();
    if (offset.numel() == 1) {
      require_position(op, x, "x", table, "table", at[0]);
      if (x.numel() > 0) cpu::position_add(x, table, at[0]);
      return;
    }
    const int64_t per_b = x.dim(1) * x.dim(2);
    for (int64_t b = 0; b < x.dim(0); ++b) {
      const TensorView xb(static_cast<char*>(x.data()) + b * per_b * static_cast<int64_t>(dtype_size(x.dtype())),
                          x.dtype(), {1, x.dim(1), x.dim(2)}, x.device());
      require_position(op, xb, "x", table, "table", at[b]);
      if (per_b > 0) cpu::position_add(xb, table, at[b]);
    }
    return;
  }
  require_position(op, x, "x", table, "table", 0);
  if (x.numel() == 0) return;
  TFM_CUDA_DISPATCH(position_add_at(x, table, offset, stream));
}

void position_backward(const TensorView& dx, int64_t offset, const TensorView& dtable,
                       const Stream& stream) {
  require_device("position_backward", stream, {{"dx", &dx}, {"dtable", &dtable}});
  require_position("position_backward", dx, "dx", dtable, "dtable", offset);
  if (dx.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::position_backward(dx, offset, dtable);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(position_backward(dx, offset, dtable, stream));
  }
}

// ------------------------------------------------------------------- dropout

void dropout_forward(const TensorView& x, float p, const RngKey& key, const TensorView& y,
                     const Stream& stream) {
  require_device("dropout_forward", stream, {{"x", &x}, {"y", &y}});
  require_float("dropout_forward", x, "x");
  require_same("dropout_forward", x, "x", y, "y");
  require_p("dropout_forward", p);
  if (x.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::dropout_forward(x, p, key, y);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(dropout_forward(x, p, key, y, stream));
  }
}

void dropout_backward(const TensorView& dy, float p, const RngKey& key, const TensorView& dx,
                      const Stream& stream) {
  require_device("dropout_backward", stream, {{"dy", &dy}, {"dx", &dx}});
  require_float("dropout_backward", dy, "dy");
  require_same("dropout_backward", dy, "dy", dx, "dx");
  require_p("dropout_backward", p);
  if (dy.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::dropout_backward(dy, p, key, dx);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(dropout_backward(dy, p, key, dx, stream));
  }
}

void attention_dropout(const TensorView& x, int64_t t, int64_t s, float p, const RngKey& key,
                       const TensorView& y, const Stream& stream) {
  const char* op = "attention_dropout";
  require_device(op, stream, {{"x", &x}, {"y", &y}});
  require_float(op, x, "x");
  require_same(op, x, "x", y, "y");
  require_p(op, p);
  TFM_REQUIRE(x.rank() >= 2 && t >= 0 && s >= 0 && t <= x.dim(-2) && s <= x.dim(-1),
              "{}: a ({}, {}) tile does not fit the padded tiles of x {}", op, t, s, x.str());
  if (x.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::attention_dropout(x, t, s, p, key, y);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(attention_dropout(x, t, s, p, key, y, stream));
  }
}

void add_dropout_forward(const TensorView& residual, const TensorView& s, float p,
                         const RngKey& key, const TensorView& y, const Stream& stream) {
  const char* op = "add_dropout_forward";
  require_device(op, stream, {{"residual", &residual}, {"s", &s}, {"y", &y}});
  require_float(op, residual, "residual");
  require_same(op, residual, "residual", s, "s");
  require_same(op, residual, "residual", y, "y");
  require_p(op, p);
  if (y.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::add_dropout_forward(residual, s, p, key, y);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(add_dropout_forward(residual, s, p, key, y, stream));
  }
}

// ---------------------------------------------------------------- layer norm

void layernorm_forward(const TensorView& x, const TensorView& gamma, const TensorView& beta,
                       float eps, const TensorView& y, const TensorView& mean,
                       const TensorView& rstd, const Stream& stream) {
  const char* op = "layernorm_forward";
  require_device(op, stream, {{"x", &x}, {"gamma", &gamma}, {"beta", &beta}, {"y", &y},
                              {"mean", &mean}, {"rstd", &rstd}});
  require_layernorm(op, x, "x", gamma, &beta, mean, rstd);
  require_same(op, x, "x", y, "y");
  TFM_REQUIRE(eps > 0.0f, "{}: eps = {} must be positive", op, eps);
  if (x.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::layernorm_forward(x, gamma, beta, eps, y, mean, rstd);
    case DeviceType::cuda:
      TFM_CUDA_DISPATCH(layernorm_forward(x, gamma, beta, eps, y, mean, rstd, stream));
  }
}

void layernorm_backward(const TensorView& x, const TensorView& gamma, const TensorView& mean,
                        const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                        const TensorView& dgamma, const TensorView& dbeta, const Stream& stream) {
  const char* op = "layernorm_backward";
  require_device(op, stream, {{"x", &x}, {"gamma", &gamma}, {"mean", &mean}, {"rstd", &rstd},
                              {"dy", &dy}, {"dx", &dx}, {"dgamma", &dgamma}, {"dbeta", &dbeta}});
  require_layernorm(op, x, "x", gamma, nullptr, mean, rstd);
  require_same(op, x, "x", dy, "dy");
  require_same(op, x, "x", dx, "dx");
  require_shape(op, dgamma, "dgamma", gamma.shape(), "D");
  require_shape(op, dbeta, "dbeta", gamma.shape(), "D");
  require_param(op, dgamma, "dgamma", x, "x");
  require_param(op, dbeta, "dbeta", x, "x");
  if (x.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::layernorm_backward(x, gamma, mean, rstd, dy, dx, dgamma, dbeta);
    case DeviceType::cuda:
      TFM_CUDA_DISPATCH(layernorm_backward(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, stream));
  }
}

void add_dropout_layernorm_forward(const TensorView& residual, const TensorView& s, float p,
                                   const RngKey& key, const TensorView& gamma,
                                   const TensorView& beta, float eps, const TensorView& h,
                                   const TensorView& y, const TensorView& mean,
                                   const TensorView& rstd, const Stream& stream) {
  const char* op = "add_dropout_layernorm_forward";
  require_device(op, stream, {{"residual", &residual}, {"s", &s}, {"gamma", &gamma},
                              {"beta", &beta}, {"h", &h}, {"y", &y}, {"mean", &mean},
                              {"rstd", &rstd}});
  require_layernorm(op, residual, "residual", gamma, &beta, mean, rstd);
  require_same(op, residual, "residual", s, "s");
  require_same(op, residual, "residual", h, "h");
  require_same(op, residual, "residual", y, "y");
  require_p(op, p);
  TFM_REQUIRE(eps > 0.0f, "{}: eps = {} must be positive", op, eps);
  if (y.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu:
      return cpu::add_dropout_layernorm_forward(residual, s, p, key, gamma, beta, eps, h, y, mean,
                                                rstd);
    case DeviceType::cuda:
      TFM_CUDA_DISPATCH(add_dropout_layernorm_forward(residual, s, p, key, gamma, beta, eps, h, y,
                                                      mean, rstd, stream));
  }
}

void add_dropout_layernorm_backward(const TensorView& h, const TensorView& gamma,
                                    const TensorView& mean, const TensorView& rstd,
                                    const TensorView& dy, float p, const RngKey& key,
                                    const TensorView& dh, const TensorView& ds,
                                    const TensorView& dgamma, const TensorView& dbeta,
                                    const Stream& stream) {
  const char* op = "add_dropout_layernorm_backward";
  require_device(op, stream, {{"h", &h}, {"gamma", &gamma}, {"mean", &mean}, {"rstd", &rstd},
                              {"dy", &dy}, {"dh", &dh}, {"ds", &ds}, {"dgamma", &dgamma},
                              {"dbeta", &dbeta}});
  require_layernorm(op, h, "h", gamma, nullptr, mean, rstd);
  require_same(op, h, "h", dy, "dy");
  require_same(op, h, "h", dh, "dh");
  require_same(op, h, "h", ds, "ds");
  require_shape(op, dgamma, "dgamma", gamma.shape(), "D");
  require_shape(op, dbeta, "dbeta", gamma.shape(), "D");
  require_param(op, dgamma, "dgamma", h, "h");
  require_param(op, dbeta, "dbeta", h, "h");
  require_p(op, p);
  if (h.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu:
      return cpu::add_dropout_layernorm_backward(h, gamma, mean, rstd, dy, p, key, dh, ds, dgamma,
                                                 dbeta);
    case DeviceType::cuda:
      TFM_CUDA_DISPATCH(add_dropout_layernorm_backward(h, gamma, mean, rstd, dy, p, key, dh, ds,
                                                       dgamma, dbeta, stream));
  }
}

// ---------------------------------------------------------------- reductions

void sum_rows(const TensorView& x, const TensorView& out, const Stream& stream) {
  require_device("sum_rows", stream, {{"x", &x}, {"out", &out}});
  require_float("sum_rows", x, "x");
  TFM_REQUIRE(x.rank() >= 2, "sum_rows: x is {} but must be (R, N)", x.str());
  require_shape("sum_rows", out, "out", Shape{x.dim(-1)}, "N");
  require_param("sum_rows", out, "out", x, "x");
  if (x.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::sum_rows(x, out);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(sum_rows(x, out, stream));
  }
}

void sum_squares(const TensorView& x, const TensorView& out, const Stream& stream) {
  require_device("sum_squares", stream, {{"x", &x}, {"out", &out}});
  require_float("sum_squares", x, "x");
  require_shape("sum_squares", out, "out", Shape{1}, "one value");
  require_stat("sum_squares", out, "out", x, "x");
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::sum_squares(x, out);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(sum_squares(x, out, stream));
  }
}

void scale(const TensorView& x, float alpha, const Stream& stream) {
  require_device("scale", stream, {{"x", &x}});
  require_float("scale", x, "x");
  if (x.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::scale(x, alpha);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(scale(x, alpha, stream));
  }
}

// ----------------------------------------------------------------- attention

void permute_0213(const TensorView& x, const TensorView& y, const Stream& stream) {
  require_device("permute_0213", stream, {{"x", &x}, {"y", &y}});
  require_float("permute_0213", x, "x");
  TFM_REQUIRE(x.rank() == 4, "permute_0213: x is {} but must be (A, B, C, D)", x.str());
  require_shape("permute_0213", y, "y", Shape{x.dim(0), x.dim(2), x.dim(1), x.dim(3)},
                "A, C, B, D");
  TFM_REQUIRE(y.dtype() == x.dtype(), "permute_0213: x is {} but y is {}", x.str(), y.str());
  TFM_REQUIRE(x.data() != y.data() || x.numel() == 0, "permute_0213: y must not be x itself");
  if (x.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::permute_0213(x, y);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(permute_0213(x, y, stream));
  }
}

namespace {
// rows (N, H * X) and heads (B, H, L, X) of one dtype; offsets (B + 1) i32.
void require_packing(const char* op, const TensorView& rows, const TensorView& offsets,
                     const TensorView& heads, int64_t col) {
  require_float(op, rows, "rows");
  TFM_REQUIRE(heads.rank() == 4, "{}: heads is {} but must be (B, H, L, X)", op, heads.str());
  TFM_REQUIRE(col >= 0 && rows.rank() == 2 && rows.dim(1) >= col + heads.dim(1) * heads.dim(3),
              "{}: rows is {} but must be (N, W) with W >= col + H * X = {} + {}", op, rows.str(),
              col, heads.dim(1) * heads.dim(3));
  TFM_REQUIRE(rows.dtype() == heads.dtype(), "{}: rows is {} but heads is {}", op, rows.str(),
              heads.str());
  TFM_REQUIRE(rows.dim(0) <= heads.dim(0) * heads.dim(2),
              "{}: {} rows do not fit {} sentences of at most {}", op, rows.dim(0), heads.dim(0),
              heads.dim(2));
  require_i32(op, offsets, "offsets");
  require_shape(op, offsets, "offsets", Shape{heads.dim(0) + 1}, "B + 1");
}
}  // namespace

void unpack_heads(const TensorView& rows, const TensorView& offsets, const TensorView& heads,
                  const Stream& stream, int64_t col) {
  require_device("unpack_heads", stream, {{"rows", &rows}, {"offsets", &offsets}, {"heads", &heads}});
  require_packing("unpack_heads", rows, offsets, heads, col);
  if (heads.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::unpack_heads(rows, offsets, heads, col);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(unpack_heads(rows, offsets, heads, col, stream));
  }
}

void pack_heads(const TensorView& heads, const TensorView& offsets, const TensorView& rows,
                const Stream& stream, int64_t col) {
  require_device("pack_heads", stream, {{"heads", &heads}, {"offsets", &offsets}, {"rows", &rows}});
  require_packing("pack_heads", rows, offsets, heads, col);
  if (rows.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::pack_heads(heads, offsets, rows, col);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(pack_heads(heads, offsets, rows, col, stream));
  }
}

void masked_softmax_forward(const TensorView& scores, const TensorView& k_lengths, bool causal,
                            const TensorView& probs, const Stream& stream) {
  const char* op = "masked_softmax_forward";
  require_device(op, stream, {{"scores", &scores}, {"k_lengths", &k_lengths}, {"probs", &probs}});
  require_float(op, scores, "scores");
  TFM_REQUIRE(scores.rank() == 4, "{}: scores is {} but must be (B, H, Tq, Tk)", op, scores.str());
  require_same(op, scores, "scores", probs, "probs");
  require_i32(op, k_lengths, "k_lengths");
  require_shape(op, k_lengths, "k_lengths", Shape{scores.dim(0)}, "B");
  if (scores.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::masked_softmax_forward(scores, k_lengths, causal, probs);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(masked_softmax_forward(scores, k_lengths, causal, probs, stream));
  }
}

void masked_softmax_backward(const TensorView& probs, const TensorView& dprobs, const TensorView& dscores,
                             const Stream& stream) {
  const char* op = "masked_softmax_backward";
  require_device(op, stream, {{"probs", &probs}, {"dprobs", &dprobs}, {"dscores", &dscores}});
  require_float(op, probs, "probs");
  TFM_REQUIRE(probs.rank() == 4, "{}: probs is {} but must be (B, H, Tq, Tk)", op, probs.str());
  require_same(op, probs, "probs", dprobs, "dprobs");
  require_same(op, probs, "probs", dscores, "dscores");
  if (probs.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::masked_softmax_backward(probs, dprobs, dscores);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(masked_softmax_backward(probs, dprobs, dscores, stream));
  }
}

// ------------------------------------------------------------- output layer

void log_softmax(const TensorView& x, const TensorView& y, const Stream& stream) {
  require_device("log_softmax", stream, {{"x", &x}, {"y", &y}});
  require_float("log_softmax", x, "x");
  TFM_REQUIRE(x.rank() >= 2 && x.dim(-1) > 0, "log_softmax: x is {} but must be (N, V) with V > 0",
              x.str());
  require_same("log_softmax", x, "x", y, "y");
  if (x.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::log_softmax(x, y);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(log_softmax(x, y, stream));
  }
}

void smoothed_cross_entropy(const TensorView& logits, const TensorView& targets, float eps,
                            float grad_scale, const TensorView& sums, const Stream& stream,
                            const TensorView& dlogits_or_empty) {
  const char* op = "smoothed_cross_entropy";
  const TensorView& dlogits = dlogits_or_empty.empty() ? logits : dlogits_or_empty;
  require_device(op, stream, {{"logits", &logits}, {"targets", &targets}, {"sums", &sums},
                              {"dlogits", &dlogits}});
  require_float(op, dlogits, "dlogits");
  TFM_REQUIRE(dlogits.shape() == logits.shape(), "{}: dlogits is {} but logits is {}", op,
              dlogits.str(), logits.str());
  TFM_REQUIRE(dlogits.data() != logits.data() || dlogits.dtype() == logits.dtype(),
              "{}: dlogits is logits in another dtype", op);
  TFM_REQUIRE(logits.device().is_cuda() || dlogits.dtype() == logits.dtype(),
              "{}: dlogits is {} but logits is {} (the cpu writes the gradient in the logits' dtype)",
              op, dtype_name(dlogits.dtype()), dtype_name(logits.dtype()));
  require_float(op, logits, "logits");
  TFM_REQUIRE(logits.rank() == 2 && logits.dim(1) > 0,
              "{}: logits is {} but must be (N, V) with V > 0", op, logits.str());
  require_i32(op, targets, "targets");
  require_shape(op, targets, "targets", Shape{logits.dim(0)}, "N");
  require_shape(op, sums, "sums", Shape{2}, "loss sum and nll sum");
  require_stat(op, sums, "sums", logits, "logits");
  TFM_REQUIRE(eps >= 0.0f && eps <= 1.0f, "{}: label smoothing eps = {} is outside [0, 1]", op, eps);
  if (logits.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu:
      return cpu::smoothed_cross_entropy(logits, targets, eps, grad_scale, sums, dlogits);
    case DeviceType::cuda:
      TFM_CUDA_DISPATCH(smoothed_cross_entropy(logits, targets, eps, grad_scale, sums, dlogits, stream));
  }
}

// ------------------------------------------------------------------ decoding

void attention_gather(const TensorView& q, const TensorView& keys, const TensorView& values,
                      const TensorView& index, const TensorView& lengths,
                      const TensorView& groups, float scale, const TensorView& out,
                      const TensorView& probs, const Stream& stream) {
  const char* op = "attention_gather";
  require_device(op, stream, {{"q", &q}, {"keys", &keys}, {"values", &values}, {"index", &index},
                              {"lengths", &lengths}, {"groups", &groups}, {"out", &out}});
  require_float(op, q, "q");
  TFM_REQUIRE(q.rank() == 3, "{}: q is {} but must be (N, H, K)", op, q.str());
  const int64_t n = q.dim(0), h = q.dim(1), k = q.dim(2);
  TFM_REQUIRE(keys.rank() == 3 && keys.dim(1) == h && keys.dim(2) == k,
              "{}: keys is {} but must be (P, {}, {}) to match q", op, keys.str(), h, k);
  TFM_REQUIRE(values.rank() == 3 && values.dim(0) == keys.dim(0) && values.dim(1) == h,
              "{}: values is {} but must be ({}, {}, E) to match keys", op, values.str(),
              keys.dim(0), h);
  for (const auto& [t, name] : {std::pair{&keys, "keys"}, std::pair{&values, "values"},
                                std::pair{&out, "out"}})
    TFM_REQUIRE(t->dtype() == q.dtype(), "{}: {} is {} but q is {}", op, name, t->str(), q.str());
  require_shape(op, out, "out", Shape{n, h, values.dim(2)}, "N, H, E");
  require_i32(op, index, "index");
  require_i32(op, lengths, "lengths");
  require_i32(op, groups, "groups");
  TFM_REQUIRE(index.rank() == 2, "{}: index is {} but must be (G, L)", op, index.str());
  require_shape(op, lengths, "lengths", Shape{index.dim(0)}, "G");
  require_shape(op, groups, "groups", Shape{n}, "N");
  if (!probs.empty()) {
    require_device(op, stream, {{"probs", &probs}});
    require_shape(op, probs, "probs", Shape{n, h, index.dim(1)}, "N, H, L");
    require_stat(op, probs, "probs", q, "q");
  }
  if (n == 0 || out.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu:
      return cpu::attention_gather(q, keys, values, index, lengths, groups, scale, out, probs);
    case DeviceType::cuda:
      TFM_CUDA_DISPATCH(attention_gather(q, keys, values, index, lengths, groups, scale, out,
                                         probs, stream));
  }
}

void extend_history(const TensorView& prev, const TensorView& parents, const TensorView& positions,
                    const TensorView& slots, const TensorView& next, const TensorView& lengths,
                    const Stream& stream) {
  const char* op = "extend_history";
  require_device(op, stream, {{"prev", &prev}, {"parents", &parents}, {"positions", &positions},
                              {"slots", &slots}, {"next", &next}, {"lengths", &lengths}});
  for (const auto& [x, name] : {std::pair{&prev, "prev"}, std::pair{&parents, "parents"},
                                std::pair{&positions, "positions"}, std::pair{&slots, "slots"},
                                std::pair{&next, "next"}, std::pair{&lengths, "lengths"}})
    require_i32(op, *x, name);
  TFM_REQUIRE(prev.rank() == 2, "{}: prev is {} but must be (R, T)", op, prev.str());
  TFM_REQUIRE(next.data() != prev.data(), "{}: next is prev (the rows are permuted)", op);
  const int64_t n = parents.numel();
  TFM_REQUIRE(next.rank() == 2 && next.dim(0) >= n && next.dim(1) == prev.dim(1),
              "{}: next is {} but must be (R', T) with R' >= {} and T as prev {}", op, next.str(), n,
              prev.str());
  require_shape(op, parents, "parents", Shape{n}, "N");
  require_shape(op, positions, "positions", Shape{n}, "N");
  require_shape(op, slots, "slots", Shape{n}, "N");
  require_shape(op, lengths, "lengths", Shape{n}, "N");
  if (n == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::extend_history(prev, parents, positions, slots, next, lengths);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(extend_history(prev, parents, positions, slots, next, lengths, stream));
  }
}

void log_softmax_topk(const TensorView& logits, const TensorView& values, const TensorView& ids,
                      const TensorView& lse, const Stream& stream) {
  const char* op = "log_softmax_topk";
  require_device(op, stream, {{"logits", &logits}, {"values", &values}, {"ids", &ids}, {"lse", &lse}});
  require_float(op, logits, "logits");
  TFM_REQUIRE(logits.rank() == 2 && logits.dim(1) > 0,
              "{}: logits is {} but must be (N, V) with V > 0", op, logits.str());
  const int64_t n = logits.dim(0), v = logits.dim(1);
  TFM_REQUIRE(values.rank() == 2 && values.dim(0) == n && values.dim(1) >= 1 && values.dim(1) <= v,
              "{}: values is {} but must be ({}, k) with 1 <= k <= {} (V)", op, values.str(), n, v);
  require_stat(op, values, "values", logits, "logits");
  require_i32(op, ids, "ids");
  require_shape(op, ids, "ids", values.shape(), "N, k");
  require_shape(op, lse, "lse", Shape{n}, "N");
  require_stat(op, lse, "lse", logits, "logits");
  if (n == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::log_softmax_topk(logits, values, ids, lse);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(log_softmax_topk(logits, values, ids, lse, stream));
  }
}


// ---------------------------------------------------------------------- int8

namespace {
// int8 runs on the CPU alone, in f32.
void require_int8_input(const char* op, const Stream& stream, const TensorView& t, const char* name) {
  TFM_REQUIRE(stream.device().is_cpu(), "{}: int8 inference runs on the CPU (on a GPU: --precision bf16)", op);
  require_device(op, stream, {{name, &t}});
  TFM_REQUIRE(t.dtype() == DType::f32, "{}: {} is {} but must be f32", op, name, dtype_name(t.dtype()));
}
}  // namespace

void quantize_int8(const TensorView& w, int8_t* values, int64_t ld, float* scales, int32_t* sums) {
  const char* op = "quantize_int8";
  require_int8_input(op, Stream(Device::cpu()), w, "w");
  TFM_REQUIRE(w.rank() == 2, "{}: w is {} but must be a matrix", op, w.str());
  const int64_t rows = w.dim(0), cols = w.dim(1);
  TFM_REQUIRE(ld >= cols && ld % kInt8RowAlign == 0, "{}: ld {} must be >= {} and a multiple of {}", op, ld,
              cols, kInt8RowAlign);
  const float* p = static_cast<const float*>(w.data());
  for (int64_t j = 0; j < rows; ++j) {
    int8_t* row = values + j * ld;
    scales[j] = cpu::quantize_row_int8(p + j * cols, cols, row, ld);
    int32_t sum = 0;
    for (int64_t q = 0; q < cols; ++q) sum += row[q];
    sums[j] = sum;
  }
}

void gemm_int8(const TensorView& x, const Int8Matrix& w, const TensorView& y, const Stream& stream,
               const TensorView& bias, bool relu) {
  const char* op = "gemm_int8";
  require_int8_input(op, stream, x, "x");
  require_int8_input(op, stream, y, "y");
  TFM_REQUIRE(x.rank() == 2 && y.rank() == 2, "{}: x and y must be matrices, got {} and {}", op,
              x.shape().str(), y.shape().str());
  const int64_t m = x.dim(0);
  TFM_REQUIRE(x.dim(1) == w.cols && w.cols > 0 && w.cols < (int64_t{1} << 17),
              "{}: x is {} but W is {} x {} (0 < K < 131072)", op, x.shape().str(), w.rows,
              w.cols);
  TFM_REQUIRE(w.ld >= w.cols && w.ld % kInt8RowAlign == 0 && w.values && w.scales && w.sums,
              "{}: W's rows are not quantized rows (ld {})", op, w.ld);
  TFM_REQUIRE(y.dim(0) == m && y.dim(1) == w.rows, "{}: y is {} but x W^T is {} x {}", op, y.shape().str(), m,
              w.rows);
  if (!bias.empty()) {
    require_int8_input(op, stream, bias, "bias");
    TFM_REQUIRE(bias.rank() == 1 && bias.dim(0) == w.rows, "{}: bias is {} but y has {} columns", op,
                bias.shape().str(), w.rows);
  }
  if (m == 0 || w.rows == 0) return;
  cpu::gemm_int8(static_cast<const float*>(x.data()), m, x.dim(1), w, static_cast<float*>(y.data()), y.dim(1),
                 bias.empty() ? nullptr : static_cast<const float*>(bias.data()), relu);
}

// ----------------------------------------------------------------- optimizer

// The control vector of update_control, as adam_step reads it: beside
// tensor x (params or sums), x's dtype.
void require_control(const char* op, const TensorView& control, const TensorView& x,
                     const char* xname) {
  TFM_REQUIRE(control.dtype() == x.dtype() && control.shape() == Shape{kUpdateControlSize},
              "{}: control is {} but must be {} ({}), as {} is", op, control.str(),
              dtype_name(x.dtype()), kUpdateControlSize, xname);
}

void adam_step(const TensorView& params, const TensorView& grads, const TensorView& m,
               const TensorView& v, const AdamOptions& o, const Stream& stream,
               const TensorView& control) {
  const char* op = "adam_step";
  require_device(op, stream, {{"params", &params}, {"grads", &grads}, {"m", &m}, {"v", &v}});
  if (!control.empty()) {
    require_device(op, stream, {{"control", &control}});
    require_control(op, control, params, "params");
  }
  TFM_REQUIRE(params.dtype() == DType::f32 || (params.device().is_cpu() && params.dtype() == DType::f64),
              "adam_step: params is {} but must be f32{}", dtype_name(params.dtype()),
              params.device().is_cpu() ? " (or f64 on the cpu)" : "");
  require_same(op, params, "params", grads, "grads");
  require_same(op, params, "params", m, "m");
  require_same(op, params, "params", v, "v");
  TFM_REQUIRE(o.step >= 1, "adam_step: step {} must be 1 or more (it is 1-based)", o.step);
  TFM_REQUIRE(o.beta1 >= 0.0f && o.beta1 < 1.0f && o.beta2 >= 0.0f && o.beta2 < 1.0f,
              "adam_step: beta1 = {} and beta2 = {} must be in [0, 1)", o.beta1, o.beta2);
  if (params.numel() == 0) return;
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::adam_step(params, grads, m, v, o, control);
    case DeviceType::cuda: TFM_CUDA_DISPATCH(adam_step(params, grads, m, v, o, control, stream));
  }
}

AdamSchedule adam_schedule(double lr, float beta1, float beta2, int64_t step) {
  TFM_REQUIRE(step >= 1, "adam_schedule: step {} must be 1 or more (it is 1-based)", step);
  const double t = static_cast<double>(step);
  return {lr, 1.0 - std::pow(static_cast<double>(beta1), t),
          1.0 - std::pow(static_cast<double>(beta2), t)};
}

void update_control(const TensorView& sums, double loss_scale, double max_norm,
                    const AdamSchedule& next, const AdamSchedule& retry, const TensorView& control,
                    const Stream& stream) {
  const char* op = "update_control";
  require_device(op, stream, {{"sums", &sums}, {"control", &control}});
  TFM_REQUIRE((sums.dtype() == DType::f32 || (sums.device().is_cpu() && sums.dtype() == DType::f64)) &&
                  sums.shape() == Shape{3},
              "{}: sums is {} but must be f32 (3){}", op, sums.str(),
              sums.device().is_cpu() ? " or f64 (3)" : "");
  require_control(op, control, sums, "sums");
  TFM_REQUIRE(loss_scale >= 1 && std::isfinite(loss_scale), "{}: loss scale {} must be finite and >= 1",
              op, loss_scale);
  switch (stream.device().type) {
    case DeviceType::cpu: return cpu::update_control(sums, loss_scale, max_norm, next, retry, control);
    case DeviceType::cuda:
      TFM_CUDA_DISPATCH(update_control(sums, loss_scale, max_norm, next, retry, control, stream));
  }
}

size_t library_memory_bytes(Device device) {
  return device.is_cpu() ? cpu::blas_buffer_bytes() : 0;
}

void check_library_memory(Device device) {
  if (device.is_cpu()) cpu::check_blas_memory();
}

}  // namespace tfm::ops
