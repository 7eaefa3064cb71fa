// Beam search and greedy search over the incremental decoder (the paper,
// "Results": beam 4, length penalty alpha 0.6, maximum output length input
// + 50, stop early when possible).
//
// Scores. A hypothesis Y (its tokens, then eos) has log-probability
// log p(Y | x) = sum of its tokens' log-probabilities, eos included, and is
// ranked by log p(Y | x) / lp(|Y|), |Y| counting eos, with the length
// penalty lp of one of two forms:
//   gnmt   ((5 + |Y|) / 6)^alpha   (Wu et al. 2016; the paper's)
//   plain  |Y|^alpha               (fairseq, Marian, CTranslate2)
//
// The search, per sentence and position: each live hypothesis proposes its
// 2W most likely next tokens (W the beam size); all proposals are ranked by
// log-probability; going down the ranking, a proposal of eos ends a
// hypothesis (it joins the finished ones), any other token continues one,
// until W continue. At the maximum length every live hypothesis ends with
// eos. A sentence stops (early stopping):
//   bound  once no live hypothesis can still enter its n-best: the n-th best
//          finished score is at least the best live log-probability divided
//          by lp(maximum |Y|), which bounds every continuation (alpha >= 0).
//          Stopping then gives the same n-best as running to the end.
//   beam   once W hypotheses have finished (fairseq's rule; not exact).
//   never  at the maximum length.
// With W = 1 the search is greedy: the most likely token at each position,
// until eos (the length penalty does not enter).
//
// Sampling (SamplingOptions::on; back-translation's, Edunov et al. 2018)
// replaces the search: each of a sentence's n_best samples is a row of
// its own that draws its next token from the model's distribution,
// tempered and cut to the top k and then to the top p (sample_token),
// until it draws eos (barred before min_len) or reaches max_len (then eos
// is forced). A draw is a pure function of (seed, the request's key, the
// sample, the position): Philox (libcore/base/rng.h), so a sentence's
// samples depend on the seed and the sentence alone, never on the batch,
// the threads or the other sentences. A sample's log_prob and
// token_log_probs are the model's own (untempered, untruncated); samples
// are returned in the order drawn (sample 0 first), not ranked.
//
// Prefixes and constraints (SearchRequest::prefix, ::constraints;
// constraints.h): a sentence holds one live hypothesis while its prefix is
// forced, then searches as above, or, with constraints, by dynamic beam
// allocation (constraints.cc); its tokens are scored by the step's full
// log-probabilities (IncrementalDecoder::log_probs). A sentence with
// neither takes exactly the steps above, whatever shares its batch.
//
// Sentences are searched together: their live hypotheses are the
// decoder's rows. A sentence that stops leaves at once, and the next
// sentences waiting join in its place (continuous batching: the decoder
// encodes them between steps), so steps stay full while there are
// sentences to take. Ties are broken by the hypothesis's row, then by the
// token id, so the result does not depend on which sentences share a step:
// on the CPU every op computes each row alone, and a sentence's n-best list
// and scores are bit-identical however it is batched.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "libcore/decode/constraints.h"
#include "libcore/decode/incremental.h"

namespace tfm {

enum class LengthPenalty { gnmt, plain };
enum class EarlyStopping { bound, beam, never };

// lp(length) for alpha >= 0 and length >= 1.
double length_penalty(int64_t length, double alpha, LengthPenalty form);

// The forms by name, as tfm-decode's --length-penalty and --early-stopping
// and the Python module's arguments take them: "gnmt" or "plain"; "bound",
// "beam" or "never". Another name is an Error that lists the choices.
LengthPenalty parse_length_penalty(std::string_view name);
EarlyStopping parse_early_stopping(std::string_view name);

struct SamplingOptions {
  bool on = false;
  int64_t top_k = 0;          // draw among the k most likely tokens (0: all)
  double top_p = 1.0;         // then among the fewest most likely whose probability reaches p, in (0, 1]
  double temperature = 1.0;   // log-probabilities divided by it before the cuts, > 0
  uint64_t seed = 1;
};

struct BeamSearchOptions {
  int64_t beam_size = 4;       // W; 1 is greedy search (sampling: the samples, = n_best)
  double alpha = 0.6;          // length penalty exponent, >= 0
  LengthPenalty length_penalty = LengthPenalty::gnmt;
  EarlyStopping early_stopping = EarlyStopping::bound;
  int64_t n_best = 1;          // hypotheses returned per sentence, <= beam_size
  int attention_layer = -1;    // keep this decoder layer's cross-attention (-1: none)
  bool attention_heads = false;  // per head instead of their mean
  // search_stream: the next sentences take a finished one's place at once
  // (continuous batching); false: only once every sentence admitted with
  // it has finished (a batch at a time; the A/B of the benchmarks).
  bool refill = true;
  SamplingOptions sampling = {};  // on: sampling instead of the search (above)
};

struct SearchRequest {
  std::vector<int32_t> source;  // ids, no bos/eos, not empty
  int64_t max_len = 0;          // tokens before eos: eos comes at the latest after these
  int64_t min_len = 0;          // tokens before eos is allowed (benchmarks force lengths)
  uint64_t key = 0;             // the sentence's identity for sampling's draws (tfm-decode: its line)
  // Tokens every hypothesis starts with, forced and scored (no eos); and
  // phrases every finished hypothesis contains, none empty, at most
  // kMaxConstraints (not with sampling). max_len must hold them:
  // forced_length (constraints.h).
  std::vector<int32_t> prefix = {};
  std::vector<std::vector<int32_t>> constraints = {};
};

struct Hypothesis {
  std::vector<int32_t> tokens;        // without the final eos
  std::vector<float> token_log_probs; // one per token, then eos's
  double log_prob = 0;                // their sum
  double score = 0;                   // log_prob / lp(tokens + 1)
  // Cross-attention weights (BeamSearchOptions::attention_layer), one row
  // per token and eos: (|Y|, S) means over heads, or (|Y|, H, S); S is the
  // source's length.
  std::vector<float> attention;
};

// Sampling's draw for one row: its V log-probabilities divided by the
// temperature, cut to the top_k most likely (0: none), then to the
// fewest most likely whose probability (renormalized after the first cut)
// reaches top_p, ranked by log-probability, ties by the smaller id; token
// `barred` (eos before min_len; -1: none) left out first. The token whose
// share of the rest holds u in [0, 1), going down that ranking (in id
// order when nothing is cut). `scratch` is reused between calls.
int32_t sample_token(const double* log_probs, int64_t V, const SamplingOptions& o, double u, int32_t barred,
                     std::vector<int32_t>& scratch);
// The uniform [0, 1) draw of sample `sample` of the request keyed `key` at
// position t (53 random bits).
double sample_uniform(uint64_t seed, uint64_t key, int64_t sample, int64_t t);

// The rows and steps a batch of these requests needs from the decoder.
int64_t search_rows(int64_t sentences, const BeamSearchOptions& options);
int64_t search_steps(const std::vector<SearchRequest>& batch);

// An ensemble (fairseq's and Marian's): a decoder a model, planned alike
// (the same limits, vocabulary and framing), stepped on the same rows; at
// each step the first's logits become their weighted mean
// (IncrementalDecoder::mix_logits: the normalized log-linear mix of the
// models' distributions), from which the search reads everything, the
// attention kept included (the first model's). A team of copies of one
// model searches as that model alone, bit for bit.
struct Team {
  std::vector<IncrementalDecoder*> members;
  std::vector<double> weights;  // one a member, >= 0
};

// Searches a batch of sentences together; returns each one's n-best list,
// best first (ties: higher log-probability, then fewer tokens, then the
// smaller token sequence). The decoder must be planned for the batch
// (search_rows, search_steps, top_k >= min(2 W, V), and the attention layer).
std::vector<std::vector<Hypothesis>> beam_search(IncrementalDecoder& decoder,
                                                 const std::vector<SearchRequest>& batch,
                                                 const BeamSearchOptions& options);
std::vector<std::vector<Hypothesis>> beam_search(const Team& team, const std::vector<SearchRequest>& batch,
                                                 const BeamSearchOptions& options);

// Many sentences (tfm-decode's, the benchmarks'), in the order given, with
// continuous batching: a decoder admits the next sentences while it has
// room for all of their beams (its limits: sentences, rows, source tokens,
// positions, and W (max_len + 1) self-attention pool rows each) and
// releases each as it stops; the results are beam_search's, bit for bit.
// With several decoders, on the CPU, they search side by side, one a
// thread, each thread's ops single-threaded, taking sentences from the one
// queue as they have room (its last ones shared out evenly between those
// that run dry, so that no thread takes a whole batch while the others
// finish a few and wait): no step waits on another thread, and the host's
// part of a search runs beside the other thread's steps. done(i, nbest) is
// called for request i as it finishes, one call at a time. A sentence that
// would not fit an empty decoder is an error. An exception from a search or
// from done stops the taking of sentences and is thrown here once the
// threads have stopped.
void search_stream(const std::vector<std::unique_ptr<IncrementalDecoder>>& decoders,
                   const std::vector<SearchRequest>& requests, const BeamSearchOptions& options,
                   const std::function<void(size_t, std::vector<Hypothesis>&&)>& done);
// The same with an ensemble a thread.
void search_stream(const std::vector<Team>& teams, const std::vector<SearchRequest>& requests,
                   const BeamSearchOptions& options, const std::function<void(size_t, std::vector<Hypothesis>&&)>& done);

// How a CPU's threads share a search: each its own batches on a decoder of
// its own (CTranslate2's inter_threads: no step waits on another thread;
// one decoder's memory a thread, the weights shared), or each batch's rows
// split between them (its intra_threads: one decoder). automatic: batches
// while the weights are small enough for each thread to read them all
// (cpu_threads_take_rows); with larger weights batches too, where the work
// at hand has a batch for every thread, else rows (search_teams). The
// outputs are the same bits.
enum class ThreadWork { automatic, batches, rows };
ThreadWork parse_thread_work(std::string_view name);  // auto, batches, rows
std::string_view thread_work_name(ThreadWork work);

// How many decoders search_stream should be given for `model` on this
// many threads: one for rows (and on a GPU), else one a thread.
int search_threads(const ModelWeights& model, int threads, ThreadWork work = ThreadWork::automatic);

// Of `teams` decoders (search_threads'), how many to give `requests`
// sentences in batches of `batch`: every one, but for automatic work with
// large weights and fewer sentences than a batch a decoder, one, whose
// batches then have every thread on their rows.
size_t search_teams(const ModelWeights& model, ThreadWork work, size_t teams, size_t requests, int64_t batch);

}  // namespace tfm
