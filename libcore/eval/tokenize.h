// sacreBLEU's tokenizers, exactly (sacrebleu 2.x, tokenizers/*.py), and the
// TER normalizer (tokenizers/tokenizer_ter.py). Each takes one line of valid
// UTF-8 (no '\n') and returns its tokens joined by single spaces, as the
// Python versions do; BLEU then splits on whitespace.
#pragma once

#include <string>
#include <string_view>

namespace tfm::eval {

enum class Tokenizer {
  none,  // the line as it is
  t13a,  // mteval-v13a.pl (sacreBLEU's default)
  intl,  // mteval-v14.pl --international-tokenization (Unicode P, S, N)
  chars  // every character a token
};

// "none", "13a", "intl", "char": the names in sacreBLEU's signature and CLI.
const char* tokenizer_name(Tokenizer t);
// Throws Error for an unknown name, listing the known ones.
Tokenizer parse_tokenizer(std::string_view name);

std::string tokenize(std::string_view line, Tokenizer t);
std::string tokenize_13a(std::string_view line);
std::string tokenize_intl(std::string_view line);
std::string tokenize_chars(std::string_view line);

// sacreBLEU's TercomTokenizer: lowercase unless case_sensitive, optionally
// the tercom normalization (tokenized punctuation, possessives) and the
// removal of punctuation; whitespace collapsed. Asian support is not there.
struct TerNormalizeOptions {
  bool case_sensitive = false;
  bool normalized = false;
  bool no_punct = false;
};
std::string normalize_ter(std::string_view line, const TerNormalizeOptions& o);

// Python's ' '.join(text.split()).
std::string collapse_whitespace(std::string_view text);

}  // namespace tfm::eval
