#include "libcore/decode/incremental.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <numeric>

#include <omp.h>

#include "kernels/ops.h"
#include "libcore/decode/plan.h"
#include "libcore/decode/shortlist.h"
#include "libcore/model/layers.h"

namespace tfm {

using model::prefix;
using namespace decode_detail;

namespace {

// The rows a step computes on a GPU for N live rows, CUDA graphs being
// kept by row count (StreamGraph): N rounded up to a quarter of the power
// of two below it (to 8 at least), at most `most`. The extra rows decode
// dummies (token 0 of slot 0 at position 0, pool row -1, which
// scatter_columns skips on CUDA) that no live row reads: every op computes
// each row alone. At most 25% more rows (N = 513 runs 640), and a handful
// of graphs a run instead of one capture a step.
int64_t graph_rows(int64_t n, int64_t most) {
  int64_t below = 1;
  while (below * 2 < n) below *= 2;
  const int64_t unit = std::max<int64_t>(8, below / 4);
  return std::min((n + unit - 1) / unit * unit, most);
}

// The shape (sentences, tokens a sentence) the encoder runs an admission of
// B sentences of up to S tokens as, on a GPU: each rounded up as graph_rows
// rounds a step's rows, within the plan, so that admissions' shapes repeat
// (cuBLASLt's plans are kept by shape) and one CUDA graph serves each
// (encoder_graph_). Where the plan's source tokens do not hold the rounded
// shape, fewer padding sentences, then S itself. The padding is tokens and
// sentences no sentence reads (encode()).
std::pair<int64_t, int64_t> encoder_shape(int64_t B, int64_t S, const DecoderLimits& l) {
  int64_t b = graph_rows(B, l.sentences), s = graph_rows(S, l.src_len);
  if (b * s > l.src_tokens) b = std::max(B, l.src_tokens / s);
  if (b * s > l.src_tokens) {
    s = S;
    b = std::max(B, std::min(graph_rows(B, l.sentences), l.src_tokens / S));
  }
  return {b, s};
}

// f(0) .. f(parts - 1) at once on the CPU's threads (one each; a team
// smaller than asked, by OMP_THREAD_LIMIT or an enclosing region, takes
// them in turn); the first exception any threw is thrown here after all
// have returned.
void for_parts(int parts, const std::function<void(int)>& f) {
  std::vector<std::exception_ptr> failed(static_cast<size_t>(parts));
#pragma omp parallel num_threads(parts)
  for (int p = omp_get_thread_num(); p < parts; p += omp_get_num_threads()) {
    try {
      f(p);
    } catch (...) {
      failed[static_cast<size_t>(p)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
}

}  // namespace

IncrementalDecoder::IncrementalDecoder(const ModelWeights& model, const DecoderLimits& limits,
                                       const Shortlist* shortlist)
    : model_(model), limits_(limits), shortlist_(shortlist) {
  const ModelConfig& c = model.config();
  const DecoderLimits& l = limits_;
  const bool graphs = l.cuda_graph;  // the encoder's hold under a shortlist too
  if (shortlist_) {
    TFM_REQUIRE(shortlist_->vocab_size() == c.vocab_size, "a shortlist of {} ids for a model of {}",
                shortlist_->vocab_size(), c.vocab_size);
    const int64_t k = std::min(limits_.top_k, c.vocab_size);
    limits_.shortlist_columns =
        shortlist_->most(std::max(limits_.src_tokens, limits_.src_len), limits_.sentences, k);
    limits_.shortlist_sentence_columns = shortlist_->most(limits_.src_len, 1, k);
    limits_.cuda_graph = false;  // a step's GEMM is as wide as the union: no graph holds for every step
  }
  plan_ = std::make_unique<Plan>(c, limits_, model.dtype(), model.param_dtype());
  const Plan& i = *plan_;
  // Rows past the live ones feed GEMMs as padding: they start finite, as
  // zeros (on the CPU without a write: the plan is sized for the largest
  // batch, and a page is touched only once a batch uses it).
  mem_ = std::make_unique<PlannedMemory>(plan_->mem, model.device(),
                                         std::initializer_list<MemoryKind>{MemoryKind::io, MemoryKind::activations},
                                         model.stream());
  staging_ = std::make_unique<HostStaging>(plan_->staging_bytes, model.stream());
  std::vector<int32_t> iota(static_cast<size_t>(l.rows));
  std::iota(iota.begin(), iota.end(), 0);
  const HostStaging::Part groups[] = {part(view(i.self_groups), iota)};
  staging_->upload(groups);
  graph_ = std::make_unique<StreamGraph>(model.stream(), l.cuda_graph);
  encoder_graph_ = std::make_unique<StreamGraph>(model.stream(), graphs);
  readback_ = std::make_unique<HostReadback>(view(i.top).bytes(), 1, model.stream());
  if (!c.learned_positions) {
    Tensor table = sinusoid_table(c, std::max(l.steps, l.src_len), model.param_dtype());
    positions_ = Tensor(table.shape(), model.param_dtype(), model.device());
    copy(positions_, table, model.stream());
  }
  slots_.resize(static_cast<size_t>(l.sentences));
  cross_index_.assign(static_cast<size_t>(l.sentences * l.src_len), 0);
  cross_lengths_.assign(static_cast<size_t>(l.sentences), 0);
  if (shortlist_) plan_union();
  release_all();
}

IncrementalDecoder::~IncrementalDecoder() = default;

std::string IncrementalDecoder::memory_report() const {
  std::string report = plan_->mem.report();
  if (union_) {
    const Union& u = *union_;
    const size_t bytes = u.panels.size() * sizeof(float) + u.values.size() + u.scales.size() * sizeof(float) +
                         (u.sums.size() + u.int8_panels.size()) * sizeof(int32_t);
    report += fmt::format("; shortlist of up to {} columns ({} a sentence){}", limits_.shortlist_columns,
                          limits_.shortlist_sentence_columns,
                          bytes ? fmt::format(", its weights' panels {}", format_bytes(bytes)) : std::string());
  }
  return report;
}

TensorView IncrementalDecoder::view(int id) const { return mem_->view(id); }

// Rows of a buffer seen as packed (rows, cols): what a GEMM reads or writes.
// Threads that split the rows (cpu_parts) must see a buffer at one width:
// rows of another width would overlap another thread's.
TensorView IncrementalDecoder::gemm_view(int id, RowSpan rows, int64_t cols) const {
  return model::rows(prefix(view(id), {rows.first + rows.count, cols}), rows.first, rows.count);
}

// The blocks' context for the decoder: its GEMMs compute each row alone
// (batch invariance, ops.h).
model::Blocks IncrementalDecoder::blocks() const {
  model::Blocks m{model_.stream(), model_.config(), model_.layout(), model_.weights(), {}, {}};
  m.row_invariant = true;
  m.int8 = model_.int8_weights();
  m.packed = model_.packed_weights();
  return m;
}

// The sub-layers' forward pieces are the training pass's own
// (model::sublayer_input, sublayer_end, final_norm, ffn_forward in
// layers.h); here, the decoder's buffers for `rows` rows. Dropout is off.
model::Norm IncrementalDecoder::norm_params(NormIds norm) const {
  return {model_.param(norm.gamma), model_.param(norm.beta), model_.config().layer_norm_eps};
}

model::NormBuffers IncrementalDecoder::norm_buffers(RowSpan rows) const {
  const Plan& i = *plan_;
  return {gemm_view(i.h, rows, model_.config().d_model), gemm_view(i.mean, rows, 1).reshape({rows.count}),
          gemm_view(i.rstd, rows, 1).reshape({rows.count})};
}

// The input of a sub-layer: x (post-norm) or LayerNorm(x) in h (pre-norm).
TensorView IncrementalDecoder::sublayer_input(NormIds norm, const TensorView& x, RowSpan rows) {
  return model::sublayer_input(blocks(), norm_params(norm), prefix(x, {rows.count, x.dim(1)}), norm_buffers(rows));
}

// The block output from the residual and the sub-layer output (buffer s_id)
// into out_id: LayerNorm(residual + s) (post-norm) or residual + s (pre-norm).
TensorView IncrementalDecoder::sublayer_end(NormIds norm, const TensorView& residual, int s_id,
                                            int out_id, RowSpan rows) {
  const int64_t D = model_.config().d_model;
  const TensorView out = gemm_view(out_id, rows, D);
  model::sublayer_end(blocks(), norm_params(norm), prefix(residual, {rows.count, D}), gemm_view(s_id, rows, D), 0.0f,
                      {}, norm_buffers(rows), out);
  return out;
}

// The feed-forward sub-layer of a block whose input is x; the block's
// output goes to x (the buffer), for the next block.
TensorView IncrementalDecoder::feed_forward(FfnIds w, NormIds norm, const TensorView& x, RowSpan rows) {
  const Plan& i = *plan_;
  const ModelConfig& c = model_.config();
  model::ffn_forward(blocks(), w, sublayer_input(norm, x, rows), gemm_view(i.f, rows, c.d_ff),
                     gemm_view(i.s, rows, c.d_model));
  return sublayer_end(norm, x, i.s, i.x, rows);
}

// Pre-norm stacks end in a layer norm: LayerNorm(y) into y_a.
TensorView IncrementalDecoder::final_norm(NormIds norm, const TensorView& y, RowSpan rows) {
  const TensorView out = gemm_view(plan_->y_a, rows, model_.config().d_model);
  model::final_norm(blocks(), norm_params(norm), prefix(y, {rows.count, y.dim(1)}), norm_buffers(rows), out);
  return out;
}

// Every slot and pool row free; no step run.
void IncrementalDecoder::release_all() {
  const DecoderLimits& l = limits_;
  for (Slot& slot : slots_) slot = Slot{};
  if (union_) {
    std::fill(union_->users.begin(), union_->users.end(), 0);
    union_->live = 0;
    union_->fresh.clear();
  }
  // Taken from the back: the lowest rows first.
  cross_free_.resize(static_cast<size_t>(l.src_tokens));
  std::iota(cross_free_.rbegin(), cross_free_.rend(), 0);
  self_free_.resize(static_cast<size_t>(l.cache_rows));
  std::iota(self_free_.rbegin(), self_free_.rend(), 0);
  std::fill(cross_lengths_.begin(), cross_lengths_.end(), 0);
  last_sentence_.clear();
  last_position_.clear();
  N_ = 0;
  S_ = 0;
}

void IncrementalDecoder::start(const std::vector<std::vector<int32_t>>& sources, int64_t rows,
                               int64_t steps) {
  const DecoderLimits& l = limits_;
  TFM_REQUIRE(rows >= 1 && rows <= l.rows && steps >= 1 && steps <= l.steps && steps * rows <= l.cache_rows,
              "a batch of {} rows over {} positions is over the plan ({} rows, {} positions, "
              "{} cache rows)",
              rows, steps, l.rows, l.steps, l.cache_rows);
  release_all();
  admit(sources);
}

int64_t IncrementalDecoder::free_slots() const {
  return std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.taken; });
}

std::vector<int32_t> IncrementalDecoder::admit(const std::vector<std::vector<int32_t>>& sources) {
  const int64_t B = static_cast<int64_t>(sources.size());
  int64_t S = 0;
  for (const auto& s : sources) {
    TFM_REQUIRE(!s.empty(), "the decoder cannot start from an empty source");
    S = std::max<int64_t>(S, static_cast<int64_t>(s.size()));
  }
  const DecoderLimits& l = limits_;
  TFM_REQUIRE(B >= 1 && B <= free_slots() && S <= l.src_len && B * S <= std::min(l.src_tokens, free_source_rows()),
              "a batch of {} sentences of up to {} tokens is over the planned {} sentences, "
              "{} tokens a sentence and {} source tokens ({} sentences and {} source tokens free)",
              B, S, l.sentences, l.src_len, l.src_tokens, free_slots(), free_source_rows());
  const ModelConfig& c = model_.config();
  for (const auto& s : sources)
    for (int32_t id : s)
      TFM_REQUIRE(id >= 0 && id < c.vocab_size, "source id {} is outside the vocabulary [0, {})", id,
                  c.vocab_size);
  // Slots, the lowest free first, and S source rows each (padding too: the
  // encoder computes it, and it is released with the sentence).
  std::vector<int32_t> taken;
  for (int32_t slot = 0; static_cast<int64_t>(taken.size()) < B; ++slot) {
    Slot& st = slots_[static_cast<size_t>(slot)];
    if (st.taken) continue;
    st = Slot{};
    st.taken = true;
    st.length = static_cast<int64_t>(sources[taken.size()].size());
    for (int64_t j = 0; j < S; ++j) {
      st.source_rows.push_back(cross_free_.back());
      cross_free_.pop_back();
    }
    std::copy(st.source_rows.begin(), st.source_rows.end(), cross_index_.begin() + slot * l.src_len);
    cross_lengths_[static_cast<size_t>(slot)] = static_cast<int32_t>(st.length);
    S_ = std::max(S_, st.length);
    if (shortlist_) {
      st.candidates = shortlist_->candidates(sources[taken.size()], static_cast<int32_t>(c.eos_id), l.top_k);
      for (int32_t id : st.candidates) union_->live += union_->users[static_cast<size_t>(id)]++ == 0;
      union_->fresh.push_back(slot);
    }
    taken.push_back(slot);
  }
  const auto start = std::chrono::steady_clock::now();
  encode(sources, taken);
  start_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return taken;
}

void IncrementalDecoder::release(int32_t s) {
  TFM_REQUIRE(s >= 0 && s < static_cast<int32_t>(slots_.size()) && slots_[static_cast<size_t>(s)].taken,
              "release: sentence slot {} is not taken", s);
  Slot& slot = slots_[static_cast<size_t>(s)];
  cross_free_.insert(cross_free_.end(), slot.source_rows.rbegin(), slot.source_rows.rend());
  self_free_.insert(self_free_.end(), slot.cache_rows.rbegin(), slot.cache_rows.rend());
  cross_lengths_[static_cast<size_t>(s)] = 0;
  if (union_) {
    for (int32_t id : slot.candidates) union_->live -= --union_->users[static_cast<size_t>(id)] == 0;
    std::erase(union_->fresh, s);
  }
  slot = Slot{};
  S_ = 0;
  for (const Slot& other : slots_) S_ = std::max(S_, other.length);
}

// The encoder over the admitted sentences (B, S), then each decoder layer's
// projection of its output into the cross-attention pools, at the slots'
// source rows. Attention reads only a sentence's own tokens (groups), so
// padding never enters a sentence's sums.
//
// On a GPU the encoder runs the shape encoder_shape() rounds (B, S) up to,
// as one CUDA graph a shape: the tokens past S are padding as the ones
// within are, and the sentences past B are empty (length 0: their
// attention reads no key and gives zeros, ops.h); neither's keys and values
// reach a pool (pool row -1, which scatter_columns skips on CUDA). Every
// row is computed alone, so the admitted sentences' outputs are what an
// unpadded run gives.
void IncrementalDecoder::encode(const std::vector<std::vector<int32_t>>& sources, const std::vector<int32_t>& slots) {
  const Plan& i = *plan_;
  const int64_t B = static_cast<int64_t>(sources.size()), Ls = limits_.src_len;
  int64_t S = 0;
  for (const auto& s : sources) S = std::max<int64_t>(S, static_cast<int64_t>(s.size()));
  const bool gpu = model_.device().is_cuda();
  const auto [Bp, Sp] = gpu ? encoder_shape(B, S, limits_) : std::pair<int64_t, int64_t>{B, S};
  const int64_t M = Bp * Sp;
  // The encoder's index (sentences, Ls) and lengths of every planned
  // sentence (0 past this admission's), as its attention reads them.
  std::vector<int32_t> src(static_cast<size_t>(M), kPadId), groups(static_cast<size_t>(M));
  std::vector<int32_t> rows(static_cast<size_t>(M), -1);  // pool rows; -1: none (a GPU's padding)
  std::vector<int32_t> index(static_cast<size_t>(Bp * Ls), -1), lengths(static_cast<size_t>(limits_.sentences), 0);
  for (int64_t b = 0; b < Bp; ++b) {
    for (int64_t j = 0; j < Sp; ++j) {
      groups[static_cast<size_t>(b * Sp + j)] = static_cast<int32_t>(b);
      index[static_cast<size_t>(b * Ls + j)] = static_cast<int32_t>(b * Sp + j);
    }
    if (b >= B) continue;  // an empty sentence (a GPU's padding)
    const auto& s = sources[static_cast<size_t>(b)];
    std::copy(s.begin(), s.end(), src.begin() + b * Sp);
    lengths[static_cast<size_t>(b)] = static_cast<int32_t>(s.size());
    const Slot& slot = slots_[static_cast<size_t>(slots[static_cast<size_t>(b)])];
    for (int64_t j = 0; j < S; ++j)
      rows[static_cast<size_t>(b * Sp + j)] = slot.source_rows[static_cast<size_t>(j)];
  }
  // The cross-attention tables: only the admitted slots' rows and lengths
  // (a step reads no other slot's that has changed).
  std::vector<HostStaging::Part> tables = {part(view(i.src), src), part(view(i.enc_groups), groups),
                                           part(view(i.enc_index), index), part(view(i.enc_lengths), lengths),
                                           part(view(i.cross_slots), rows)};
  for (int32_t slot : slots) {
    const auto at = static_cast<size_t>(slot);
    tables.emplace_back(slice(view(i.cross_index), slot * Ls, S),
                        std::span<const int32_t>(cross_index_.data() + at * static_cast<size_t>(Ls), static_cast<size_t>(S)));
    tables.emplace_back(slice(view(i.cross_lengths), slot, 1), std::span<const int32_t>(cross_lengths_.data() + at, 1));
  }
  staging_->upload(tables);
  // The kernels read every table from the upload, at the plan's addresses:
  // one graph holds for every admission of the shape.
  if (gpu) return encoder_graph_->run(Bp * (Ls + 1) + Sp, [&] { encode_rows(0, Bp, Bp, Sp); });
  // Sentences are padded to S rows each, so an even split of them is an
  // even split of the work (cpu_parts); a thread's attention reads only
  // its own sentences' rows.
  const int threads = cpu_parts(M);
  const int parts = static_cast<int>(std::min<int64_t>(threads, B));
  if (parts == 1) return encode_rows(0, B, B, S);
  for_parts(parts, [&](int p) { encode_rows(B * p / parts, B * (p + 1) / parts, B, S); });
}

// The encoder and the cross-attention pools for sentences [b0, b1) of an
// admission of B sentences padded to S (rows b0 S .. b1 S), its tables
// uploaded.
void IncrementalDecoder::encode_rows(int64_t b0, int64_t b1, int64_t B, int64_t S) {
  const ModelConfig& c = model_.config();
  const ParamLayout& L = model_.layout();
  const Stream& st = model_.stream();
  const Plan& i = *plan_;
  const int64_t M = B * S, H = c.heads, D = c.d_model;
  const int64_t HK = H * c.d_k, HE = H * c.d_v;
  const RowSpan r{b0 * S, (b1 - b0) * S};
  const TensorView enc_index = prefix(view(i.enc_index), {B, limits_.src_len});
  const TensorView enc_lengths = prefix(view(i.enc_lengths), {B});

  const TensorView x = gemm_view(i.x, r, D);
  ops::embedding_forward(slice(view(i.src), r.first, r.count), model_.param(L.src_embed), embedding_scale(c), x,
                         st);
  ops::position_add(x.reshape({b1 - b0, S, D}),
                    c.learned_positions ? model_.param(L.src_pos) : positions_.view(), 0, st);
  const model::Blocks m = blocks();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.d_k)));
  TensorView y = x;
  for (int64_t layer = 0; layer < c.encoder_layers; ++layer) {
    const EncoderLayerIds& w = L.encoder[static_cast<size_t>(layer)];
    TensorView in = sublayer_input(w.self_attn_norm, y, r);
    const TensorView qkv = gemm_view(i.qkv, r, 2 * HK + HE);
    model::linear_forward(m, in, model::joined(m, w.self_attn.q, w.self_attn.v), qkv);
    const TensorView q = gemm_view(i.q, r, HK), ctx = gemm_view(i.ctx, r, HE);
    ops::copy_columns(qkv, 0, q, st);
    ops::copy_columns(qkv, HK, gemm_view(i.k, r, HK), st);
    ops::copy_columns(qkv, 2 * HK, gemm_view(i.v, r, HE), st);
    // Keys and values by their rows in the batch: a sentence's own.
    ops::attention_gather(q.reshape({r.count, H, c.d_k}), prefix(view(i.k), {M, H, c.d_k}),
                          prefix(view(i.v), {M, H, c.d_v}), enc_index, enc_lengths,
                          slice(view(i.enc_groups), r.first, r.count), scale,
                          ctx.reshape({r.count, H, c.d_v}), {}, st);
    model::linear_forward(m, ctx, w.self_attn.out, gemm_view(i.s, r, D));
    const TensorView y_a = sublayer_end(w.self_attn_norm, y, i.s, i.y_a, r);
    y = feed_forward(w.ffn, w.ffn_norm, y_a, r);
  }
  if (c.pre_norm) y = final_norm(L.encoder_norm, y, r);
  for (int64_t layer = 0; layer < c.decoder_layers; ++layer) {
    const AttentionIds& w = L.decoder[static_cast<size_t>(layer)].cross_attn;
    // In this thread's rows of qkv as the layers saw them ((2 HK + HE)
    // wide): packed (HK + HE) wide from its own first row, they would reach
    // into rows another thread may still be using.
    const TensorView kv(gemm_view(i.qkv, r, 2 * HK + HE).data(), model_.dtype(), {r.count, HK + HE},
                        model_.device());
    model::linear_forward(m, y, model::joined(m, w.k, w.v), kv);
    const TensorView rows = slice(view(i.cross_slots), r.first, r.count);
    ops::scatter_columns(kv, 0, rows, view(i.cross_k[static_cast<size_t>(layer)]), st);
    ops::scatter_columns(kv, HK, rows, view(i.cross_v[static_cast<size_t>(layer)]), st);
  }
}

void IncrementalDecoder::step(const std::vector<Row>& rows) {
  const ModelConfig& c = model_.config();
  const Plan& i = *plan_;
  const DecoderLimits& l = limits_;
  const int64_t N = static_cast<int64_t>(rows.size());
  TFM_REQUIRE(N >= 1 && N <= l.rows, "step of {} rows: the decoder was planned for {} rows", N, l.rows);
  TFM_REQUIRE(N <= free_cache_rows(), "step of {} rows: {} self-attention pool rows are free of {} planned", N,
              free_cache_rows(), l.cache_rows);
  const auto start = std::chrono::steady_clock::now();
  if (union_ && !union_->fresh.empty()) refresh_union();

  // On a GPU the step runs for n >= N rows (graph_rows), a graph kept for
  // each (n, the step's parity): the kernels read the rows from the
  // upload, [tokens | sentences | parents | positions | slots] (n each);
  // the self-attention lists grow on the device (extend_history). Rows
  // past N are dummies (graph_rows). With graphs off too, so that cuBLASLt
  // sees the same shapes (it picks its algorithm by the row count) and a
  // row gets the same bits.
  const int64_t n = model_.device().is_cuda() ? graph_rows(N, l.rows) : N;
  std::vector<int32_t> up(static_cast<size_t>(kStepTables * n), 0);
  std::vector<int32_t> sentence(static_cast<size_t>(N)), position(static_cast<size_t>(N));
  for (int64_t r = 0; r < N; ++r) {
    const Row& row = rows[static_cast<size_t>(r)];
    TFM_REQUIRE(row.token >= 0 && row.token < c.vocab_size,
                "token id {} is outside the vocabulary [0, {})", row.token, c.vocab_size);
    TFM_REQUIRE(row.sentence >= 0 && row.sentence < l.sentences && slots_[static_cast<size_t>(row.sentence)].taken,
                "row {} reads sentence slot {}, which holds no sentence", r, row.sentence);
    const Slot& slot = slots_[static_cast<size_t>(row.sentence)];
    int32_t p = 0;
    if (slot.stepped) {
      TFM_REQUIRE(row.parent >= 0 && row.parent < N_ && last_sentence_[static_cast<size_t>(row.parent)] == row.sentence,
                  "row {} of sentence slot {} continues row {}, not one of its sentence's in the last step", r,
                  row.sentence, row.parent);
      p = last_position_[static_cast<size_t>(row.parent)] + 1;
      TFM_REQUIRE(p < l.steps, "row {} would decode position {}, past the {} planned", r, p + 1, l.steps);
    }
    sentence[static_cast<size_t>(r)] = row.sentence;
    position[static_cast<size_t>(r)] = p;
    up[static_cast<size_t>(r)] = row.token;
    up[static_cast<size_t>(n + r)] = row.sentence;
    up[static_cast<size_t>(2 * n + r)] = slot.stepped ? row.parent : 0;
    up[static_cast<size_t>(3 * n + r)] = p;
  }
  // Each row's keys and values go to a free pool row, its sentence's
  // until released.
  for (int64_t r = 0; r < N; ++r) {
    const int32_t pool_row = self_free_.back();
    self_free_.pop_back();
    slots_[static_cast<size_t>(sentence[static_cast<size_t>(r)])].cache_rows.push_back(pool_row);
    up[static_cast<size_t>(4 * n + r)] = pool_row;
  }
  for (int64_t r = N; r < n; ++r) up[static_cast<size_t>(4 * n + r)] = -1;  // dummies write nothing
  for (const Row& row : rows) slots_[static_cast<size_t>(row.sentence)].stepped = true;
  const HostStaging::Part parts[] = {part(view(i.step_rows), up)};
  staging_->upload(parts);
  // The rest only queues kernels, on a GPU as one graph.
  const int parity = static_cast<int>(steps_run_ % 2);
  graph_->run(2 * n + parity, [&] { queue_step(n, parity); });
  last_sentence_ = std::move(sentence);
  last_position_ = std::move(position);
  N_ = N;
  ++steps_run_;
  rows_fed_ += N;
  lse_ready_ = false;
  step_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool cpu_threads_take_rows(const ModelWeights& model) {
  constexpr size_t kCachedWeights = size_t{32} << 20;
  const size_t weight_bytes = static_cast<size_t>(model.layout().total()) *
                              (model.int8_weights() ? 1 : dtype_size(model.dtype()));
  return model.device().is_cpu() && weight_bytes <= kCachedWeights;
}

// How many of the CPU's threads to split `rows` rows between, each to run
// a whole stretch of ops (a step, the encoder) on its own rows: every op
// computes each row alone (the contract of the decoding ops and of
// row_invariant's GEMM), so a split changes no bit, and one parallel region
// replaces the ~14 a layer that each op would fork and join, with the
// serial moments between them; while the weights are small
// (cpu_threads_take_rows) and each thread has rows enough to stream them.
// 1: the ops' own threads (and on a GPU).
int IncrementalDecoder::cpu_parts(int64_t rows) const {
  constexpr int64_t kRowsPerThread = 16;
  if (!cpu_threads_take_rows(model_)) return 1;
  return static_cast<int>(std::clamp<int64_t>(rows / kRowsPerThread, 1, omp_get_max_threads()));
}

// The kernels of a step of N rows, its rows and position uploaded; t's
// parity picks which self-attention lists it reads. On the CPU, split
// between threads (cpu_parts).
void IncrementalDecoder::queue_step(int64_t N, int parity) {
  const int parts = cpu_parts(N);
  if (parts == 1) return queue_rows({0, N}, N, parity);
  // Rows differ in cost (a batch is sorted by source length, and a row's
  // attention reads its source), so each thread's share of the rows follows
  // how fast it went through its last ones: the threads finish together.
  if (static_cast<int>(shares_.size()) != parts) shares_.assign(static_cast<size_t>(parts), 1.0 / parts);
  std::vector<int64_t> bounds(static_cast<size_t>(parts) + 1, N);
  double before = 0;
  for (int p = 0; p < parts; ++p) {
    const int64_t at = std::clamp(static_cast<int64_t>(std::llround(before * static_cast<double>(N))),
                                  int64_t{p}, N - (parts - p));  // every share a row at least
    bounds[static_cast<size_t>(p)] = p == 0 ? 0 : std::max(bounds[static_cast<size_t>(p) - 1] + 1, at);
    before += shares_[static_cast<size_t>(p)];
  }
  std::vector<double> seconds(static_cast<size_t>(parts));
  for_parts(parts, [&](int part) {
    const auto p = static_cast<size_t>(part);
    const auto start = std::chrono::steady_clock::now();
    queue_rows({bounds[p], bounds[p + 1] - bounds[p]}, N, parity);
    seconds[p] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  // Shares in proportion to rows a second, half-way from the old ones (a
  // thread the OS paused for a moment loses rows for a few steps only).
  std::vector<double> rate(static_cast<size_t>(parts));
  double total = 0;
  for (size_t p = 0; p < rate.size(); ++p)
    total += rate[p] = static_cast<double>(bounds[p + 1] - bounds[p]) / std::max(seconds[p], 1e-9);
  double sum = 0;
  for (size_t p = 0; p < rate.size(); ++p)
    sum += shares_[p] = std::max(0.5 * (shares_[p] + rate[p] / total), 0.25 / parts);
  for (double& share : shares_) share /= sum;
}

// Rows r of a step of N, its rows uploaded: the whole step for those rows
// alone (queue_step). Every view is of the limits' size, and what changes
// from step to step is read from the upload (the rows' positions and pool
// rows) or from the device (the lists extend_history writes, the
// cross-attention tables admit() uploads), so that a graph of this work
// holds for every step of N rows of this parity.
void IncrementalDecoder::queue_rows(RowSpan r, int64_t N, int parity) {
  const ModelConfig& c = model_.config();
  const ParamLayout& L = model_.layout();
  const Stream& st = model_.stream();
  const Plan& i = *plan_;
  const DecoderLimits& l = limits_;
  const int64_t H = c.heads, HK = H * c.d_k, HE = H * c.d_v, D = c.d_model;
  const int64_t n = r.count;
  const TensorView rows_up = view(i.step_rows);
  const TensorView tokens = slice(rows_up, r.first, n), cross_groups = slice(rows_up, N + r.first, n);
  const TensorView positions = slice(rows_up, 3 * N + r.first, n);
  // The lists of these rows: (n, steps) from row r.first, read as groups
  // 0..n-1; their new keys and values go to pool rows `slots`.
  const TensorView prev = prefix(view(i.history[parity]), {l.rows, l.steps});
  const TensorView self_index = model::rows(prefix(view(i.history[1 - parity]), {l.rows, l.steps}), r.first, n);
  const TensorView self_lengths = slice(view(i.self_lengths), r.first, n);
  const TensorView slots = slice(rows_up, 4 * N + r.first, n);
  ops::extend_history(prev, slice(rows_up, 2 * N + r.first, n), positions, slots, self_index, self_lengths, st);
  const TensorView self_groups = prefix(view(i.self_groups), {n});
  const TensorView cross_index = prefix(view(i.cross_index), {l.sentences, l.src_len});
  const TensorView cross_lengths = view(i.cross_lengths);

  // x = sqrt(D) E[token] + PE[position]   (no dropout when decoding; the
  // scale 1 without scale_embeddings)
  const TensorView x = gemm_view(i.x, r, D);
  ops::embedding_forward(tokens, model_.param(L.tgt_embed), embedding_scale(c), x, st);
  ops::position_add_at(x.reshape({n, 1, D}), c.learned_positions ? model_.param(L.tgt_pos) : positions_.view(),
                       positions, st);

  const model::Blocks m = blocks();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.d_k)));
  TensorView y = x;
  for (int64_t layer = 0; layer < c.decoder_layers; ++layer) {
    const size_t ly = static_cast<size_t>(layer);
    const DecoderLayerIds& w = L.decoder[ly];
    // Self-attention: q, k and v by one GEMM; this position's keys and
    // values go into the pools, at the rows' pool rows (slots); each row
    // reads its history.
    TensorView in = sublayer_input(w.self_attn_norm, y, r);
    const TensorView qkv = gemm_view(i.qkv, r, 2 * HK + HE);
    model::linear_forward(m, in, model::joined(m, w.self_attn.q, w.self_attn.v), qkv);
    const TensorView pool_k = view(i.pool_k[ly]), pool_v = view(i.pool_v[ly]);
    const TensorView q = gemm_view(i.q, r, HK), ctx = gemm_view(i.ctx, r, HE);
    ops::copy_columns(qkv, 0, q, st);
    ops::scatter_columns(qkv, HK, slots, pool_k, st);
    ops::scatter_columns(qkv, 2 * HK, slots, pool_v, st);
    ops::attention_gather(q.reshape({n, H, c.d_k}), pool_k.reshape({pool_k.dim(0), H, c.d_k}),
                          pool_v.reshape({pool_v.dim(0), H, c.d_v}), self_index, self_lengths,
                          self_groups, scale, ctx.reshape({n, H, c.d_v}), {}, st);
    model::linear_forward(m, ctx, w.self_attn.out, gemm_view(i.s, r, D));
    const TensorView y_a = sublayer_end(w.self_attn_norm, y, i.s, i.y_a, r);

    // Attention over the sentence's source, shared by its rows.
    in = sublayer_input(w.cross_attn_norm, y_a, r);
    model::linear_forward(m, in, w.cross_attn.q, q);
    const bool keep = layer == l.attention_layer;
    const TensorView cross_k = view(i.cross_k[ly]), cross_v = view(i.cross_v[ly]);
    ops::attention_gather(q.reshape({n, H, c.d_k}), cross_k.reshape({cross_k.dim(0), H, c.d_k}),
                          cross_v.reshape({cross_v.dim(0), H, c.d_v}), cross_index, cross_lengths,
                          cross_groups, scale, ctx.reshape({n, H, c.d_v}),
                          keep ? model::rows(prefix(view(i.probs), {N, H * l.src_len}), r.first, n)
                                     .reshape({n, H, l.src_len})
                               : TensorView(),
                          st);
    model::linear_forward(m, ctx, w.cross_attn.out, gemm_view(i.s, r, D));
    const TensorView y_b = sublayer_end(w.cross_attn_norm, y_a, i.s, i.y_b, r);

    y = feed_forward(w.ffn, w.ffn_norm, y_b, r);
  }
  if (c.pre_norm) y = final_norm(L.decoder_norm, y, r);
  if (union_) return shortlist_projection(m, y, r);
  model::output_projection(m, y, model_.weight(L.out_proj), gemm_view(i.logits, r, c.vocab_size),
                           L.out_bias >= 0 ? model_.param(L.out_bias) : TensorView());
}

void IncrementalDecoder::mix_logits(const std::vector<IncrementalDecoder*>& others, const std::vector<double>& weights) {
  TFM_REQUIRE(weights.size() == others.size() + 1, "internal: {} weights for {} models", weights.size(),
              others.size() + 1);
  TFM_REQUIRE(N_ > 0, "mix_logits before a step");
  double total = 0;
  for (double w : weights) total += w;
  TFM_REQUIRE(total > 0, "an ensemble's weights must sum to more than 0");
  const int64_t V = vocab_size();
  const TensorView mine = prefix(view(plan_->logits), {N_, V});
  const Stream& st = model_.stream();
  // Each other member's logits := w_i / W (z_i - z_0), all against z_0
  // before any is added; then added in order. A member's step ran on its
  // own stream: done before this one reads it, and this one's reads done
  // before the member's next step writes there.
  for (size_t i = 0; i < others.size(); ++i) {
    IncrementalDecoder& o = *others[i];
    TFM_REQUIRE(o.N_ == N_ && o.vocab_size() == V && o.model_.device() == model_.device(),
                "an ensemble's members must step the same rows over one vocabulary on one device");
    o.model_.stream().synchronize();
    const TensorView theirs = prefix(o.view(o.plan_->logits), {N_, V});
    ops::scaled_difference(theirs, mine, static_cast<float>(weights[i + 1] / total), theirs, st);
  }
  for (IncrementalDecoder* o : others) ops::add(mine, prefix(o->view(o->plan_->logits), {N_, V}), mine, st);
  st.synchronize();
  lse_ready_ = false;
}

void IncrementalDecoder::top_k(int64_t k, std::vector<double>& log_probs, std::vector<int32_t>& ids) {
  TFM_REQUIRE(N_ > 0, "top_k before a step");
  TFM_REQUIRE(k >= 1 && k <= limits_.top_k, "top_k: k = {} is outside the planned [1, {}]", k,
              limits_.top_k);
  const Plan& i = *plan_;
  const Stream& st = model_.stream();
  // One download of [values | ids], the only point of a step where the
  // host waits for the device.
  const TensorView top = view(i.top);
  const DType st_dtype = view(i.lse).dtype();
  const size_t value_bytes = static_cast<size_t>(N_ * k) * dtype_size(st_dtype);
  const TensorView values(top.data(), st_dtype, {N_, k}, top.device());
  const TensorView top_ids(static_cast<char*>(top.data()) + value_bytes, DType::i32, {N_, k}, top.device());
  if (union_)
    shortlist_topk(values, top_ids);
  else
    ops::log_softmax_topk(prefix(view(i.logits), {N_, model_.config().vocab_size}), values, top_ids,
                          prefix(view(i.lse), {N_}), st);
  const TensorView parts[] = {values, top_ids};
  const int slot = readback_->download(parts);
  const auto wait_start = std::chrono::steady_clock::now();
  const char* down = readback_->read(slot);
  waited_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  log_probs.resize(static_cast<size_t>(N_ * k));
  ids.resize(static_cast<size_t>(N_ * k));
  for (size_t j = 0; j < ids.size(); ++j) {
    if (st_dtype == DType::f64) {
      double v;
      std::memcpy(&v, down + j * sizeof(double), sizeof v);
      log_probs[j] = v;
    } else {
      float v;
      std::memcpy(&v, down + j * sizeof(float), sizeof v);
      log_probs[j] = v;
    }
  }
  std::memcpy(ids.data(), down + value_bytes, ids.size() * sizeof(int32_t));
  if (union_) {  // positions in a row's candidates -> vocabulary ids
    for (size_t j = 0; j < ids.size(); ++j) {
      const Slot& slot = slots_[static_cast<size_t>(last_sentence_[j / static_cast<size_t>(k)])];
      ids[j] = slot.candidates[static_cast<size_t>(ids[j])];
    }
  }
  lse_ready_ = true;
}

std::vector<double> IncrementalDecoder::log_prob_of(int32_t token) {
  const int64_t V = model_.config().vocab_size;
  TFM_REQUIRE(lse_ready_, "log_prob_of needs top_k of the same step first");
  TFM_REQUIRE(token >= 0 && token < V, "token id {} is outside the vocabulary [0, {})", token, V);
  const Plan& i = *plan_;
  const Stream& st = model_.stream();
  const TensorView column = prefix(view(i.column), {N_});
  if (union_) return shortlist_log_prob_of(token);
  ops::copy_columns(prefix(view(i.logits), {N_, V}), token, column.reshape({N_, 1}), st);
  std::vector<double> out = download(column, st);
  const std::vector<double> lse = download(prefix(view(i.lse), {N_}), st);
  for (size_t r = 0; r < out.size(); ++r) out[r] -= lse[r];
  return out;
}

Tensor IncrementalDecoder::log_probs() {
  TFM_REQUIRE(N_ > 0, "log_probs before a step");
  if (union_) return shortlist_log_probs();
  const TensorView logits = prefix(view(plan_->logits), {N_, model_.config().vocab_size});
  Tensor host(logits.shape(), logits.dtype());
  copy(host, logits, model_.stream());
  ops::log_softmax(host, host, host_stream());
  return host;
}

Tensor IncrementalDecoder::attention() {
  TFM_REQUIRE(plan_->probs >= 0, "the decoder was not planned to keep attention weights");
  TFM_REQUIRE(N_ > 0, "attention before a step");
  // Kept as (N, H, src_len): the first S_ columns of each row (the longest
  // source taken).
  const int64_t H = model_.config().heads, Ls = limits_.src_len;
  const TensorView probs = prefix(view(plan_->probs), {N_, H, Ls});
  Tensor all(probs.shape(), probs.dtype()), host({N_, H, S_}, probs.dtype());
  copy(all, probs, model_.stream());
  const size_t el = dtype_size(probs.dtype());
  for (int64_t row = 0; row < N_ * H; ++row)
    std::memcpy(static_cast<char*>(host.view().data()) + static_cast<size_t>(row * S_) * el,
                static_cast<const char*>(all.view().data()) + static_cast<size_t>(row * Ls) * el,
                static_cast<size_t>(S_) * el);
  return host;
}

}  // namespace tfm
