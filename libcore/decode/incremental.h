// Incremental decoding (libcore/decode): the encoder over a batch
// of sentences, then the decoder one position at a time for rows
// (hypotheses) that may be reordered, duplicated and dropped between steps,
// as a beam search needs. It gives the full forward pass's log-probabilities
// (tests/unit/incremental_test.cc holds it to that) without recomputing
// prefixes; its sub-layers are the training pass's own (model/layers.h).
//
// Keys and values are written once into pools and never move. In
// self-attention one GEMM projects q, k and v side by side, and the keys and
// values a row feeds at a step are copied to a free pool row, and each row
// reads its own history of pool rows (ops::attention_gather): a beam that
// continues row `parent` inherits the parent's history, so reordering and
// dropping rows costs a few integers a row on the host. Cross-attention:
// the projected source of a sentence is in pool rows of its own (its row of
// the cross index), shared by all of its beams.
//
// Sentences come and go between steps (continuous batching): admit()
// encodes new sentences into free sentence slots while others are being
// decoded, their rows join the next step at position 0, and release()
// gives a finished sentence's slot and pool rows back. start() is the
// batch-at-a-time form: every slot released, then one admission.
//
// Memory is planned at construction from DecoderLimits, never grown:
// activations for an admission's source tokens and for `rows` hypotheses,
// the pools (kv-cache), the index tables (io). Nothing grows afterwards.
//
// Batch invariance: every op computes each row alone (ops.h, "decode"),
// the GEMMs too (GemmOptions::row_invariant), so on the CPU a sentence's
// log-probabilities are bit-identical whatever else shares its batch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "libcore/base/memory.h"
#include "libcore/model/batch.h"
#include "libcore/model/weights.h"

namespace tfm {

namespace model {
struct Blocks;
struct Norm;
struct NormBuffers;
}

struct DecoderLimits {
  int64_t sentences = 1;    // B: sentences of a batch
  int64_t src_tokens = 1;   // B * S: source tokens of a batch, padding included
  int64_t src_len = 1;      // S: the longest source
  int64_t rows = 1;         // N: rows of one step (sentences x beam)
  int64_t steps = 1;        // T: positions a batch decodes (eos included)
  int64_t cache_rows = 0;   // self-attention pool rows a batch may use, T_b x R_b
                            // (0: steps x rows, the most any batch can need)
  int64_t top_k = 8;        // the largest k of top_k()
  int attention_layer = -1; // keep this decoder layer's cross-attention (-1: none)
  bool cuda_graph = true;   // run each step, and each admission's encoder, as one CUDA graph
                            // (StreamGraph; CUDA only; translate_limits: off under
                            // TFM_CUDA_GRAPHS=0; a step's off under a shortlist)
  // Under a shortlist (set by the decoder from it; 0 otherwise): the most
  // output columns of a step (U, the union of the admitted sentences'
  // candidates) and of one sentence.
  int64_t shortlist_columns = 0, shortlist_sentence_columns = 0;
};

// Whether the CPU's threads should each run whole stretches of decoding on
// their own rows (a step's share of the rows, or sentences on a decoder of
// their own: search.h, search_stream) instead of splitting each op between
// them: on the CPU while the model's weights fit a last-level cache, since
// each thread then reads every weight itself, and a decoder a thread costs
// its planned memory a thread (tests/bench/NOTES.md has what each choice
// measured on which CPU).
bool cpu_threads_take_rows(const ModelWeights& model);

class Shortlist;

// Under a vocabulary shortlist (shortlist.h) each sentence gets its own
// candidates when admitted; a step projects onto the union of the
// admitted sentences' candidates only (their rows of the output projection
// gathered once when the union changes, not each step), and each row's
// log-softmax and top k run over its own sentence's candidates alone, so
// that a row's results depend on its sentence's set, never on its batch:
// probabilities are normalized over the set (as Marian's); a token outside
// it has log-probability -inf (top_k, log_prob_of, log_probs).
class IncrementalDecoder {
 public:
  // Reads `model`'s weights (a ModelWeights, or a Transformer's), which
  // must outlive it, and the shortlist (optional) likewise; plans and owns
  // the rest of its memory.
  IncrementalDecoder(const ModelWeights& model, const DecoderLimits& limits, const Shortlist* shortlist = nullptr);
  ~IncrementalDecoder();
  IncrementalDecoder(const IncrementalDecoder&) = delete;
  IncrementalDecoder& operator=(const IncrementalDecoder&) = delete;

  // Releases every sentence, then admits `sources` (one per sentence, no
  // bos/eos, none empty) into slots 0, 1, ...: a batch. `rows` and `steps`:
  // the most rows a step of this batch will feed and the positions it will
  // decode (within the limits, and steps x rows within cache_rows).
  void start(const std::vector<std::vector<int32_t>>& sources, int64_t rows, int64_t steps);

  // Encodes `sources` (no bos/eos, none empty) into free sentence slots,
  // the lowest first, and returns them: between steps, beside sentences
  // being decoded. Needs as many free slots (free_slots) and, for the
  // sources padded to their longest, S, as many free source rows
  // (free_source_rows; also at most limits.src_tokens at once) and S at
  // most limits.src_len.
  std::vector<int32_t> admit(const std::vector<std::vector<int32_t>>& sources);
  // Gives sentence slot s and every pool row its rows used back; its rows
  // must not be fed again.
  void release(int32_t s);
  // Releases every sentence (start() without an admission).
  void reset() { release_all(); }
  int64_t free_slots() const;
  int64_t free_source_rows() const { return static_cast<int64_t>(cross_free_.size()); }
  // Self-attention pool rows free: each row of a step takes one, and keeps
  // it until its sentence is released (a sentence of W beams decoding T
  // positions takes at most W T).
  int64_t free_cache_rows() const { return static_cast<int64_t>(self_free_.size()); }

  struct Row {
    int32_t sentence;  // the slot of the source it reads (start(): an index into its sources)
    int32_t parent;    // the row of the last step it continues (unread at its sentence's first step)
    int32_t token;     // the token it feeds at this position
  };
  // Decodes one position for every row: the next token's logits. A row of
  // a sentence that has not stepped yet is at position 0; any other
  // continues a row of the last step of the same sentence, one position on.
  void step(const std::vector<Row>& rows);

  // Ensembles: after every member's step() on the same rows, this
  // decoder's logits become the members' weighted mean (weights[0] this
  // decoder's, the others' in order), computed as z_0 + sum_i (w_i / W)
  // (z_i - z_0), W the weights' sum: z_0 itself when the members are
  // copies of one model. The others' logits are overwritten. top_k,
  // log_prob_of and log_probs then read the mean: their log-softmax is the
  // normalized log-linear mix of the members' distributions (Marian's
  // weighted sum of log-probabilities, renormalized).
  void mix_logits(const std::vector<IncrementalDecoder*>& others, const std::vector<double>& weights);

  // Of the last step, per row r: the k most likely next tokens, best first
  // (ties: smaller id), and their log-probabilities, at [r * k + i].
  void top_k(int64_t k, std::vector<double>& log_probs, std::vector<int32_t>& ids);
  // Of the last step, per row: log p(token).
  std::vector<double> log_prob_of(int32_t token);
  // Of the last step: every row's log-probabilities, (N, V), on the host.
  Tensor log_probs();
  // Of the last step: the cross-attention weights of limits.attention_layer,
  // (N, H, S) on the host, S the longest source admitted and not released
  // (0 past a sentence's end).
  Tensor attention();

  int64_t vocab_size() const { return model_.config().vocab_size; }
  const ModelConfig& config() const { return model_.config(); }
  const StreamGraph& graph() const { return *graph_; }
  // The encoder's graphs on a GPU, one a padded admission shape (encode()).
  const StreamGraph& encoder_graph() const { return *encoder_graph_; }
  // Seconds the host spent in top_k's download, waiting for the device's
  // work (on a GPU: the decode is device-bound where this is most of the
  // wall clock, host-bound where it is little); summed since construction.
  double device_wait_seconds() const { return waited_; }
  // Seconds the host spent queuing steps (step(): the rows' upload and the
  // step's work, on a GPU a graph's launch, or its capture the first time
  // (graph() splits the two)) and in start() (the encoder queued), summed
  // since construction. What the wall clock has beside these and the
  // wait is the caller's: the search's bookkeeping between steps.
  double step_seconds() const { return step_seconds_; }
  // Steps run and rows fed, summed since construction: how full steps ran.
  int64_t steps_run() const { return steps_run_; }
  int64_t rows_fed() const { return rows_fed_; }
  double start_seconds() const { return start_seconds_; }
  const DecoderLimits& limits() const { return limits_; }
  std::string memory_report() const;

 private:
  struct Plan;  // plan.h
  struct Union;  // the shortlist's union of candidates (incremental.cc)
  // Rows [first, first + count) of the activations: a step's, or one
  // thread's share of them (queue_step).
  struct RowSpan {
    int64_t first, count;
  };
  TensorView view(int id) const;
  TensorView gemm_view(int id, RowSpan rows, int64_t cols) const;
  model::Blocks blocks() const;
  void release_all();
  // Under a shortlist (incremental_shortlist.cc).
  void plan_union();
  void refresh_union();
  void shortlist_projection(const model::Blocks& m, const TensorView& y, RowSpan r);
  void shortlist_topk(const TensorView& values, const TensorView& ids);
  std::vector<double> shortlist_log_prob_of(int32_t token);
  Tensor shortlist_log_probs();
  void encode(const std::vector<std::vector<int32_t>>& sources, const std::vector<int32_t>& slots);
  void encode_rows(int64_t first_sentence, int64_t end_sentence, int64_t B, int64_t S);
  int cpu_parts(int64_t rows) const;
  void queue_step(int64_t rows, int parity);
  void queue_rows(RowSpan rows, int64_t step_rows, int parity);
  model::Norm norm_params(NormIds norm) const;
  model::NormBuffers norm_buffers(RowSpan rows) const;
  TensorView sublayer_end(NormIds norm, const TensorView& residual, int s_id, int out_id, RowSpan rows);
  TensorView sublayer_input(NormIds norm, const TensorView& x, RowSpan rows);
  TensorView final_norm(NormIds norm, const TensorView& y, RowSpan rows);
  TensorView feed_forward(FfnIds w, NormIds norm, const TensorView& x, RowSpan rows);

  const ModelWeights& model_;
  DecoderLimits limits_;
  std::unique_ptr<Plan> plan_;
  std::unique_ptr<PlannedMemory> mem_;
  Tensor positions_;  // sinusoid table on the device (sinusoidal positions)
  // A sentence slot: whether it is taken, its source's length and pool
  // rows (cross-attention: its padded length's), the self-attention pool
  // rows its rows have taken, and whether it has stepped.
  struct Slot {
    bool taken = false, stepped = false;
    int64_t length = 0;
    std::vector<int32_t> source_rows, cache_rows;
    std::vector<int32_t> candidates;  // under a shortlist: its vocabulary ids, sorted
  };
  std::vector<Slot> slots_;
  std::vector<int32_t> cross_free_, self_free_;  // free pool rows, taken from the back
  // The cross-attention tables as uploaded: (sentences, src_len) pool rows
  // and (sentences) lengths.
  std::vector<int32_t> cross_index_, cross_lengths_;
  // The last step: its rows' sentences and positions; the steps run (their
  // parity picks the self-attention lists); the longest source taken (S_).
  std::vector<int32_t> last_sentence_, last_position_;
  int64_t N_ = 0, steps_run_ = 0, rows_fed_ = 0, S_ = 0;
  std::unique_ptr<HostStaging> staging_;  // uploads: encode()'s tables, each step's rows
  std::unique_ptr<StreamGraph> graph_;    // a step's kernels as one graph, one a (rows, parity)
  std::unique_ptr<StreamGraph> encoder_graph_;  // an admission's encoder, one a padded shape
  std::unique_ptr<HostReadback> readback_;  // top_k's download, into pinned memory
  bool lse_ready_ = false;                // top_k ran for the last step
  double waited_ = 0;                     // device_wait_seconds
  double step_seconds_ = 0, start_seconds_ = 0;
  std::vector<double> shares_;            // each CPU thread's share of a step's rows (queue_step)
  const Shortlist* shortlist_ = nullptr;
  std::unique_ptr<Union> union_;          // under a shortlist
};

}  // namespace tfm
