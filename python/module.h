// What module.cc and translator.cc share: the pieces a list of strings
// stands for, the docstrings that help() prints, and the Translator's binding.
#pragma once

#include <nanobind/nanobind.h>

#include <string>
#include <string_view>
#include <vector>

namespace tfm::python {

// A line of pieces (tfm-tok's output: single spaces between) as a list, and back;
// an empty string is no pieces. Error for a piece that is empty or holds whitespace.
std::vector<std::string> split_pieces(std::string_view line);
std::string join_pieces(const std::vector<std::string>& pieces);
// Error for a sentence that holds a line break: the programs read lines.
void check_line(const std::string& text);

void bind_translator(nanobind::module_& m);

inline constexpr const char* kTokenizerDoc = R"(Tokenizer(path)

The SentencePiece model of tfm-tok: a .model file, a vocabulary bundle
(.tfmvocab: encode with its source model, decode with its target model) or
a tfm checkpoint (its embedded model).

  encode(texts)   each sentence's pieces, as `tfm-tok -m PATH` writes them
  decode(pieces)  each list of pieces as text, as `tfm-tok -d -m PATH`

Encoding and decoding are byte-identical to spm_encode and spm_decode.)";

inline constexpr const char* kMetricsDoc = R"(Text metrics of tfm-score, sacreBLEU 2.x's numbers.

  bleu(hyps, refs)      corpus BLEU (13a, exp smoothing by default)
  chrf(hyps, refs)      chrF (word_order=2: chrF++)
  ter(hyps, refs)       TER
  parseval(test, gold)  EVALB's bracket scores of parse trees

hyps: a list of strings; refs: a list of strings, or a list of such lists
(several references, each as long as hyps). Each returns a Score: .score,
.signature, .name, .details; str(score) is tfm-score's line,
"BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:tfm-X = 22.6 ...".)";

inline constexpr const char* kCheckpointDoc = R"(Checkpoint(path)

What a tfm checkpoint (model.bin) holds, read and checked as every program
reads it: its configuration (dict), the model's vocabulary size, the embedded
tokenizer's size, the parameter count, the tensor table, and the training
state tfm-train left in it (None in an averaged or converted model).)";

inline constexpr const char* kTranslatorDoc = R"(Translator(path, device="auto", precision="auto", threads=0)

Translate with a tfm checkpoint, as tfm-decode does (man tfm-decode).

  path       the checkpoint (model.bin; tfm-train, tfm-avgckpt or tfm-convert
             wrote it), with its embedded SentencePiece model
  device     auto (CUDA when a GPU is usable, else the CPU), cpu, cuda, cuda:N
  precision  auto (bf16 on a GPU, fp32 on the CPU), fp32, int8 on the CPU
             (8-bit weights), bf16 or fp16 on a GPU
  threads    the CPU threads of each translate or score call (0: those
             of the calling thread, OMP_NUM_THREADS by default)

translate(sources, beam=4, alpha=0.6, n_best=1, max_len_a=1.0, max_len_b=50.0,
          return_scores=False, return_attention=False, length_penalty="gnmt",
          early_stopping="bound")

  sources    a list of sentences (text: encoded with the checkpoint's
             tokenizer and the output decoded to text, as
             `tfm-tok -m PATH | tfm-decode -m PATH --detok`), or a list of
             lists of pieces (pieces out, as `tfm-decode -m PATH`)
  beam       beam size; 1 is greedy search (--beam)
  alpha      length penalty exponent, GNMT's ((5 + |Y|) / 6)^alpha (--alpha)
  n_best     hypotheses per sentence, best first, <= beam (--n-best)
  max_len_a, max_len_b
             output tokens at most a * |source| + b (--max-len-a, --max-len-b)
  length_penalty
             gnmt, or plain: |Y|^alpha, as CTranslate2 and fairseq rank
             (--length-penalty)
  early_stopping
             bound: a sentence's search stops once no hypothesis can still
             enter its n-best (exact); beam: once beam hypotheses have
             ended (CTranslate2's and fairseq's rule, fewer steps); never
             (--early-stopping)
  return_scores, return_attention
             with either, or n_best > 1, each sentence gives a list of n_best
             Hypothesis objects (.output, .score, .log_prob,
             .token_log_probs, and .attention: the last decoder layer's
             cross-attention, mean over heads, a float32 NumPy array of
             (output tokens + eos, source tokens + eos) when asked)

Returns one output per source (text or list of pieces), or those lists of
Hypothesis objects. The results are tfm-decode's bit for bit: the same
batches (its default --batch-size, 32 sentences on the CPU and 256 on a GPU,
and --max-tokens 8192 windows), the same search.
The GIL is released while it runs; one Translator translates one call at a
time.

score(sources, targets)

  The log-probability of each target given its source (forced decoding), as
  `tfm-score -m PATH SRC TGT` (text, or lists of pieces as above). Returns
  a ModelScores: .perplexity, .log_prob, .tokens (eos included),
  .sentences (each sentence's log-probability), .token_log_probs.

Errors raise tfm.Error with tfm-decode's message.)";

}  // namespace tfm::python
