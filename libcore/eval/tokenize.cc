#include "libcore/eval/tokenize.h"

#include <vector>

#include "libcore/base/error.h"
#include "libcore/eval/unicode.h"

namespace tfm::eval {

namespace {

bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (s.find(from) == std::string::npos) return;
  std::string out;
  size_t i = 0;
  for (size_t hit; (hit = s.find(from, i)) != std::string::npos; i = hit + from.size())
    (out += std::string_view(s).substr(i, hit - i)) += to;
  out += std::string_view(s).substr(i);
  s = std::move(out);
}

// The class [\{-\~\[-\` -\&\(-\+\:-\@\/] of the 13a and tercom regexes.
bool is_13a_punct(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

// re.sub of a two-character pattern (first, second) with `emit`, scanning as
// Python does: a match consumes both characters, so the second one cannot
// start the next match. Works on bytes: every pattern here tests ASCII, and
// a multi-byte character's bytes are neither ASCII nor split by a match.
template <typename Match, typename Emit>
std::string sub_pairs(const std::string& s, Match match, Emit emit) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  for (; i + 1 < s.size(); ++i) {
    if (match(s[i], s[i + 1])) {
      emit(out, s[i], s[i + 1]);
      ++i;
    } else {
      out += s[i];
    }
  }
  if (i < s.size()) out += s[i];
  return out;
}

// The Western part shared by 13a and tercom's normalization, on " LINE ".
std::string western_punctuation(const std::string& padded, bool possessives) {
  std::string s;
  s.reserve(padded.size() * 2);
  for (char c : padded) {  // ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> ' \1 '
    if (is_13a_punct(c)) {
      s += ' ';
      s += c;
      s += ' ';
    } else {
      s += c;
    }
  }
  // tercom: "'s " -> " 's ". (Its "'s$" rule cannot match: the line ends in ' '.)
  if (possessives) replace_all(s, "'s ", " 's ");
  const auto period_or_comma = [](char c) { return c == '.' || c == ','; };
  // ([^0-9])([\.,]) -> '\1 \2 '
  s = sub_pairs(
      s, [&](char a, char b) { return !is_ascii_digit(a) && period_or_comma(b); },
      [](std::string& o, char a, char b) { o.append({a, ' ', b, ' '}); });
  // ([\.,])([^0-9]) -> ' \1 \2'
  s = sub_pairs(
      s, [&](char a, char b) { return period_or_comma(a) && !is_ascii_digit(b); },
      [](std::string& o, char a, char b) { o.append({' ', a, ' ', b}); });
  // ([0-9])(-) -> '\1 \2 '
  s = sub_pairs(
      s, [](char a, char b) { return is_ascii_digit(a) && b == '-'; },
      [](std::string& o, char a, char b) { o.append({a, ' ', b, ' '}); });
  return s;
}

void replace_entities(std::string& s) {
  if (s.find('&') == std::string::npos) return;
  replace_all(s, "&quot;", "\"");
  replace_all(s, "&amp;", "&");
  replace_all(s, "&lt;", "<");
  replace_all(s, "&gt;", ">");
}

}  // namespace

const char* tokenizer_name(Tokenizer t) {
  switch (t) {
    case Tokenizer::none: return "none";
    case Tokenizer::t13a: return "13a";
    case Tokenizer::intl: return "intl";
    case Tokenizer::chars: return "char";
  }
  return "?";
}

Tokenizer parse_tokenizer(std::string_view name) {
  for (Tokenizer t : {Tokenizer::none, Tokenizer::t13a, Tokenizer::intl, Tokenizer::chars})
    if (name == tokenizer_name(t)) return t;
  fail("unknown tokenizer '{}' (known: 13a, intl, none, char)", name);
}

std::string collapse_whitespace(std::string_view text) {
  std::vector<std::string_view> words;
  split_words(text, words);
  std::string out;
  out.reserve(text.size());
  for (std::string_view w : words) {
    if (!out.empty()) out += ' ';
    out += w;
  }
  return out;
}

std::string tokenize_13a(std::string_view line) {
  std::string s(line);
  replace_all(s, "<skipped>", "");
  replace_all(s, "-\n", "");
  replace_all(s, "\n", " ");
  replace_entities(s);
  return collapse_whitespace(western_punctuation(" " + s + " ", false));
}

std::string tokenize_intl(std::string_view line) {
  std::u32string s;
  decode_utf8(line, s);
  // re.sub with a two-character pattern on code points, as sub_pairs.
  const auto sub = [](const std::u32string& in, auto match, std::u32string_view before,
                      std::u32string_view middle, std::u32string_view after) {
    std::u32string out;
    out.reserve(in.size() * 2);
    size_t i = 0;
    for (; i + 1 < in.size(); ++i) {
      if (match(in[i], in[i + 1])) {
        (((out += before) += in[i]) += middle) += in[i + 1];
        out += after;
        ++i;
      } else {
        out += in[i];
      }
    }
    if (i < in.size()) out += in[i];
    return out;
  };
  // (\P{N})(\p{P}) -> '\1 \2 '
  s = sub(s, [](char32_t a, char32_t b) { return !is_number(a) && is_punct(b); }, U"", U" ", U" ");
  // (\p{P})(\P{N}) -> ' \1 \2'
  s = sub(s, [](char32_t a, char32_t b) { return is_punct(a) && !is_number(b); }, U" ", U" ", U"");
  // (\p{S}) -> ' \1 '
  std::u32string out;
  out.reserve(s.size() * 2);
  for (char32_t c : s) {
    if (is_symbol(c)) {
      ((out += U' ') += c) += U' ';
    } else {
      out += c;
    }
  }
  return collapse_whitespace(to_utf8(out));
}

std::string tokenize_chars(std::string_view line) {
  std::u32string s;
  decode_utf8(line, s);
  std::string out;
  out.reserve(line.size() * 2);
  for (char32_t c : s) {
    if (is_space(c)) continue;
    if (!out.empty()) out += ' ';
    append_utf8(c, out);
  }
  return out;
}

std::string tokenize(std::string_view line, Tokenizer t) {
  switch (t) {
    case Tokenizer::none: return std::string(line);
    case Tokenizer::t13a: return tokenize_13a(line);
    case Tokenizer::intl: return tokenize_intl(line);
    case Tokenizer::chars: return tokenize_chars(line);
  }
  return std::string(line);
}

std::string normalize_ter(std::string_view line, const TerNormalizeOptions& o) {
  if (line.empty()) return {};
  std::string s = o.case_sensitive ? std::string(line) : py_lower_utf8(line);
  if (o.normalized) {
    replace_all(s, "\n-", "");
    replace_all(s, "\n", " ");
    replace_entities(s);
    s = western_punctuation(" " + s + " ", true);
  }
  if (o.no_punct) {  // [\.,\?:;!\"\(\)] removed
    std::string kept;
    kept.reserve(s.size());
    for (char c : s)
      if (std::string_view(".,?:;!\"()").find(c) == std::string_view::npos) kept += c;
    s = std::move(kept);
  }
  return collapse_whitespace(s);
}

}  // namespace tfm::eval
