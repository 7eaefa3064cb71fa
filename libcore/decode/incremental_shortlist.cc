// The incremental decoder under a vocabulary shortlist (incremental.h,
// shortlist.h): the union of the admitted sentences' candidates, the step's
// output projection onto it, and each row's read-outs over its own
// sentence's candidates alone.
#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/ops.h"
#include "libcore/decode/plan.h"
#include "libcore/decode/shortlist.h"
#include "libcore/model/int8.h"
#include "libcore/model/layers.h"

namespace tfm {

using model::prefix;
using namespace decode_detail;

// The union's host memory, for the most columns
// (DecoderLimits::shortlist_columns): on the CPU, its rows of the output
// projection as the GEMM's panels (f32 with packed weights) or in int8.
void IncrementalDecoder::plan_union() {
  const ModelConfig& c = model_.config();
  const ModelWeights& model = model_;
  const DecoderLimits& l = limits_;
  union_ = std::make_unique<Union>();
  union_->column.assign(static_cast<size_t>(c.vocab_size), -1);
  union_->users.assign(static_cast<size_t>(c.vocab_size), 0);
  const int64_t U = l.shortlist_columns, D = c.d_model;
  if (const model::Int8Weights* q = model.int8_weights()) {
    const ops::Int8Matrix full = q->find(model.weight(model.layout().out_proj));
    union_->values.resize(static_cast<size_t>(U * full.ld));
    union_->scales.resize(static_cast<size_t>(U));
    union_->sums.resize(static_cast<size_t>(U));
    if (full.panels) union_->int8_panels.resize(static_cast<size_t>(ops::panels_floats(U, full.ld / 4)));
  } else if (model.packed_weights() && model.device().is_cpu() && model.dtype() == DType::f32) {
    union_->panels.resize(static_cast<size_t>(ops::panels_floats(U, D)));
  }
}

// logits (n, U) = y E_U^T (+ b_U) for rows r, E_U the union's rows
// (refresh_union), by the GEMM output_projection runs: each element the
// same dot product as over the whole vocabulary.         y (n, D)
void IncrementalDecoder::shortlist_projection(const model::Blocks& m, const TensorView& y, RowSpan r) {
  const Plan& i = *plan_;
  const ParamLayout& L = model_.layout();
  const Stream& st = model_.stream();
  const int64_t D = model_.config().d_model;
  const Union& u = *union_;
  const int64_t U = static_cast<int64_t>(u.ids.size());
  const TensorView logits = gemm_view(i.logits, r, U);
  const TensorView bias = L.out_bias >= 0 ? prefix(view(i.sl_bias), {U}) : TensorView();
  if (m.int8) {
    ops::gemm_int8(y, u.int8, logits, st, bias);
    return;
  }
  ops::GemmOptions o = m.gemm();
  o.trans_b = true;
  if (!u.panels.empty()) o.packed_b = u.panels.data();
  ops::gemm(y, prefix(view(i.sl_weights), {U, D}), logits, o, st, bias);
}

// The union of the candidates of the sentences admitted, its rows of the
// output projection gathered (and laid out as the GEMM reads them), and
// the slots' columns into it: before the first step after an admission.
// The ids a new sentence brings are appended (their rows gathered, the
// last panels laid out again), so an admission costs its own new ids; the
// union is built again, in id order, only when it would outgrow the plan
// or hold more than a quarter more ids than the sentences still admitted
// need (a released sentence leaves its ids behind). A row's results do
// not depend on the union's order: each logit is a dot product alone.
void IncrementalDecoder::refresh_union() {
  Union& u = *union_;
  const Plan& i = *plan_;
  const ModelConfig& c = model_.config();
  const ParamLayout& L = model_.layout();
  const Stream& st = model_.stream();
  const int64_t V = c.vocab_size, D = c.d_model;
  std::vector<int32_t> added;
  for (int32_t s : u.fresh)
    for (int32_t id : slots_[static_cast<size_t>(s)].candidates)
      if (u.column[static_cast<size_t>(id)] < 0) added.push_back(id);
  std::sort(added.begin(), added.end());
  added.erase(std::unique(added.begin(), added.end()), added.end());
  const auto grown = static_cast<int64_t>(u.ids.size() + added.size());
  int64_t first = static_cast<int64_t>(u.ids.size());  // the first column to gather
  std::vector<int32_t> slots = std::move(u.fresh);     // whose columns to upload
  u.fresh.clear();
  if (grown > limits_.shortlist_columns || 4 * grown > 5 * u.live) {
    for (int32_t id : u.ids) u.column[static_cast<size_t>(id)] = -1;
    u.ids.clear();
    for (int32_t id = 0; id < V; ++id)
      if (u.users[static_cast<size_t>(id)] > 0) u.ids.push_back(id);
    first = 0;
    slots.clear();
    for (size_t s = 0; s < slots_.size(); ++s)
      if (slots_[s].taken) slots.push_back(static_cast<int32_t>(s));
  } else {
    u.ids.insert(u.ids.end(), added.begin(), added.end());
  }
  const int64_t U = static_cast<int64_t>(u.ids.size());
  TFM_REQUIRE(U <= limits_.shortlist_columns, "internal: a shortlist union of {} columns, {} planned", U,
              limits_.shortlist_columns);
  for (int64_t j = first; j < U; ++j) u.column[static_cast<size_t>(u.ids[static_cast<size_t>(j)])] = static_cast<int32_t>(j);
  if (first < U) {
    // Rows [first, U): their ids up, then the rows of the output projection
    // (and bias) gathered.
    const std::span<const int32_t> more(u.ids.data() + first, static_cast<size_t>(U - first));
    const HostStaging::Part ids[] = {{slice(view(i.sl_ids), first, U - first), more}};
    staging_->upload(ids);
    const TensorView at = slice(view(i.sl_ids), first, U - first);
    const TensorView w = prefix(view(i.sl_weights), {U, D});
    ops::embedding_forward(at, model_.param(L.out_proj), 1.0f, model::rows(w, first, U - first), st);
    if (L.out_bias >= 0)
      ops::embedding_forward(at, model_.param(L.out_bias).reshape({V, 1}), 1.0f,
                             model::rows(prefix(view(i.sl_bias), {U, 1}), first, U - first), st);
    // The panels from the one holding row `first` (CPU memory).
    const int64_t p0 = first / ops::kPanelRows * ops::kPanelRows;
    if (const model::Int8Weights* q = model_.int8_weights()) {
      const ops::Int8Matrix full = q->find(model_.weight(L.out_proj));
      const auto ld = static_cast<size_t>(full.ld);
      for (auto j = static_cast<size_t>(first); j < static_cast<size_t>(U); ++j) {
        const auto id = static_cast<size_t>(u.ids[j]);
        std::memcpy(u.values.data() + j * ld, full.values + id * ld, ld);
        u.scales[j] = full.scales[id];
        u.sums[j] = full.sums[id];
      }
      u.int8 = {u.values.data(), u.scales.data(), u.sums.data(), U, full.cols, full.ld, nullptr};
      if (!u.int8_panels.empty()) {
        ops::pack_int8_panels(u.values.data() + static_cast<size_t>(p0) * ld, U - p0, full.ld,
                              u.int8_panels.data() + p0 * full.ld / 4);
        u.int8.panels = u.int8_panels.data();
      }
    } else if (!u.panels.empty()) {
      ops::pack_panels(model::rows(w, p0, U - p0), u.panels.data() + p0 * D);
    }
  }
  // The slots' candidates as columns of the union.
  const int64_t Ks = limits_.shortlist_sentence_columns;
  std::vector<int32_t> columns;
  for (int32_t s : slots) {
    const std::vector<int32_t>& cand = slots_[static_cast<size_t>(s)].candidates;
    TFM_REQUIRE(static_cast<int64_t>(cand.size()) <= Ks, "internal: a sentence of {} candidates, {} planned",
                cand.size(), Ks);
    columns.resize(cand.size());
    for (size_t k = 0; k < cand.size(); ++k) columns[k] = u.column[static_cast<size_t>(cand[k])];
    const HostStaging::Part table[] = {{slice(view(i.sl_columns), s * Ks, static_cast<int64_t>(cand.size())), columns}};
    staging_->upload(table);
  }
}

// Under a shortlist, top_k's device work: for each row, its logits over
// its sentence's candidates gathered (a row of its own: the log-softmax's
// sums then see the same values in the same places whatever the union),
// their top k and normalizer; the ids are positions in the candidates.
void IncrementalDecoder::shortlist_topk(const TensorView& values, const TensorView& ids) {
  const Plan& i = *plan_;
  const Stream& st = model_.stream();
  const int64_t U = static_cast<int64_t>(union_->ids.size()), Ks = limits_.shortlist_sentence_columns;
  const TensorView logits = prefix(view(i.logits), {N_, U});
  const TensorView lse = prefix(view(i.lse), {N_, 1});
  for (int64_t r = 0; r < N_; ++r) {
    const int32_t s = last_sentence_[static_cast<size_t>(r)];
    const auto n = static_cast<int64_t>(slots_[static_cast<size_t>(s)].candidates.size());
    const TensorView row = prefix(view(i.sl_row), {n, 1});
    ops::embedding_forward(slice(view(i.sl_columns), s * Ks, n), model::rows(logits, r, 1).reshape({U, 1}), 1.0f,
                           row, st);
    ops::log_softmax_topk(row.reshape({1, n}), model::rows(values, r, 1), model::rows(ids, r, 1),
                          model::rows(lse, r, 1).reshape({1}), st);
  }
}

std::vector<double> IncrementalDecoder::shortlist_log_prob_of(int32_t token) {
  const Plan& i = *plan_;
  const Stream& st = model_.stream();
  const TensorView column = prefix(view(i.column), {N_});
  const int32_t at = union_->column[static_cast<size_t>(token)];
  std::vector<double> out(static_cast<size_t>(N_), -std::numeric_limits<double>::infinity());
  if (at < 0) return out;
  const int64_t U = static_cast<int64_t>(union_->ids.size());
  ops::copy_columns(prefix(view(i.logits), {N_, U}), at, column.reshape({N_, 1}), st);
  const std::vector<double> x = download(column, st);
  const std::vector<double> lse = download(prefix(view(i.lse), {N_}), st);
  for (size_t r = 0; r < out.size(); ++r) {
    const std::vector<int32_t>& cand = slots_[static_cast<size_t>(last_sentence_[r])].candidates;
    if (std::binary_search(cand.begin(), cand.end(), token)) out[r] = x[r] - lse[r];
  }
  return out;
}

Tensor IncrementalDecoder::shortlist_log_probs() {
  // Each row's log-softmax over its sentence's candidates (host_stream,
  // in the logits' dtype, as the whole vocabulary's), -inf elsewhere.
  const std::vector<int32_t>& col = union_->column;
  const int64_t U = static_cast<int64_t>(union_->ids.size()), V = model_.config().vocab_size;
  const TensorView logits = prefix(view(plan_->logits), {N_, U});
  const DType dt = logits.dtype();
  const size_t el = dtype_size(dt);
  Tensor x(logits.shape(), dt), host({N_, V}, dt);
  copy(x, logits, model_.stream());
  const float inf32 = -std::numeric_limits<float>::infinity();
  const double inf64 = -std::numeric_limits<double>::infinity();
  TFM_REQUIRE(dt == DType::f32 || dt == DType::f64, "internal: log_probs of {} logits", dtype_name(dt));
  const void* inf = dt == DType::f32 ? static_cast<const void*>(&inf32) : static_cast<const void*>(&inf64);
  auto* out = static_cast<char*>(host.view().data());
  const auto* in = static_cast<const char*>(x.view().data());
  for (int64_t j = 0; j < N_ * V; ++j) std::memcpy(out + static_cast<size_t>(j) * el, inf, el);
  for (int64_t r = 0; r < N_; ++r) {
    const std::vector<int32_t>& cand = slots_[static_cast<size_t>(last_sentence_[static_cast<size_t>(r)])].candidates;
    Tensor row({1, static_cast<int64_t>(cand.size())}, dt);
    auto* p = static_cast<char*>(row.view().data());
    for (size_t k = 0; k < cand.size(); ++k)
      std::memcpy(p + k * el, in + static_cast<size_t>(r * U + col[static_cast<size_t>(cand[k])]) * el, el);
    ops::log_softmax(row, row, host_stream());
    for (size_t k = 0; k < cand.size(); ++k)
      std::memcpy(out + (static_cast<size_t>(r * V) + static_cast<size_t>(cand[k])) * el, p + k * el, el);
  }
  return host;
}

}  // namespace tfm
