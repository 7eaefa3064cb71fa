// The BLEU of "Attention Is All You Need" as tensor2tensor's
// get_ende_bleu.sh computed it: Moses tokenizer.perl -l de (its defaults:
// XML escaping on, no aggressive hyphen splitting) on hypotheses and
// references, compounds split as "rich ##AT##-##AT## text" by
//   perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g'
// and multi-bleu.perl (tokenized, cased, no smoothing, its brevity penalty).
//
// Reproduced: every rule of tokenizer.perl's tokenize() for -l de as in
// Moses' current master (including "split the last word's period"; Moses
// before 2018 kept "No." at the end of a line whole), its German
// non-breaking prefixes, the Perl whitespace classes, and multi-bleu.perl's
// arithmetic. Not reproduced: Perl's \p{IsAlpha} includes Other_Alphabetic
// (combining vowel signs of Indic scripts, circled letters), which tfm's
// tables (from Python's unicodedata) lack: letters here are L* and Nl.
// Irrelevant for German and English news text. Lines of nothing but
// whitespace pass through tokenizer.perl unchanged, and multi-bleu.perl
// would count a non-ASCII space in them (U+3000, say) as a word; tfm counts
// no words there.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "libcore/eval/bleu.h"

namespace tfm::eval {

// tokenizer.perl -l de on one line (valid UTF-8, no '\n').
std::string moses_tokenize_de(std::string_view line);
// s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g on one line.
std::string split_compounds(std::string_view line);

// The whole pipeline on every segment, then multi-bleu.perl. The score is
// in percent like sacreBLEU's; precisions too.
BleuScore paper_bleu(const std::vector<std::string>& hyps,
                     const std::vector<std::vector<std::string>>& refs);

}  // namespace tfm::eval
