#include "libcore/eval/paper_bleu.h"

#include <fmt/format.h>

#include <cmath>
#include <string_view>
#include <unordered_set>

#include "libcore/eval/unicode.h"

namespace tfm::eval {

namespace {

// Moses' nonbreaking_prefix.de: a word from this list followed by a period
// does not end a sentence. (The file has no #NUMERIC_ONLY# entries.)
const std::unordered_set<std::u32string>& german_prefixes() {
  static const std::unordered_set<std::u32string> prefixes = [] {
    std::unordered_set<std::u32string> p;
    for (char c = 'A'; c <= 'Z'; ++c) p.insert(std::u32string(1, c)), p.insert(std::u32string(1, c + 32));
    for (int n = 1; n <= 99; ++n) {  // German ordinals: "1." is "1st"
      std::u32string number;
      for (char c : std::to_string(n)) number += static_cast<char32_t>(c);
      p.insert(number);
    }
    for (const char32_t* w :
         {U"I", U"II", U"III", U"IV", U"V", U"VI", U"VII", U"VIII", U"IX", U"X", U"XI", U"XII",
          U"XIII", U"XIV", U"XV", U"XVI", U"XVII", U"XVIII", U"XIX", U"XX", U"i", U"ii", U"iii",
          U"iv", U"v", U"vi", U"vii", U"viii", U"ix", U"x", U"xi", U"xii", U"xiii", U"xiv", U"xv",
          U"xvi", U"xvii", U"xviii", U"xix", U"xx", U"Adj", U"Adm", U"Adv", U"Asst", U"Bart",
          U"Bldg", U"Brig", U"Bros", U"Capt", U"Cmdr", U"Col", U"Comdr", U"Con", U"Corp", U"Cpl",
          U"DR", U"Dr", U"Ens", U"Gen", U"Gov", U"Hon", U"Hosp", U"Insp", U"Lt", U"MM", U"MR",
          U"MRS", U"MS", U"Maj", U"Messrs", U"Mlle", U"Mme", U"Mr", U"Mrs", U"Ms", U"Msgr", U"Op",
          U"Ord", U"Pfc", U"Ph", U"Prof", U"Pvt", U"Rep", U"Reps", U"Res", U"Rev", U"Rt", U"Sen",
          U"Sens", U"Sfc", U"Sgt", U"Sr", U"St", U"Supt", U"Surg", U"Mio", U"Mrd", U"bzw", U"vs",
          U"usw", U"d.h", U"z.B", U"u.a", U"etc", U"MwSt", U"ggf", U"d.J", U"D.h", U"m.E", U"vgl",
          U"I.F", U"z.T", U"sogen", U"ff", U"u.E", U"g.U", U"g.g.A", U"c.-\u00e0-d", U"Buchst",
          U"u.s.w", U"sog", U"u.\u00e4", U"Std", U"evtl", U"Zt", U"Chr", U"u.U", U"o.\u00e4",
          U"Ltd", U"b.A", U"z.Zt", U"spp", U"sen", U"SA", U"k.o", U"jun", U"i.H.v", U"dgl",
          U"dergl", U"Co", U"zzt", U"usf", U"s.p.a", U"Dkr", U"bzgl", U"BSE", U"No", U"Nos",
          U"Art", U"Nr", U"pp", U"ca", U"Ca"})
      p.insert(w);
    return p;
  }();
  return prefixes;
}

// Perl's \s on character strings: Python's whitespace less U+001C..U+001F.
bool perl_space(char32_t c) { return is_space(c) && !(c >= 0x1C && c <= 0x1F); }

// A global substitution as Perl (and Python) scan: at each position,
// `match` returns the length it consumes (0: no match) after appending
// its replacement to out; otherwise the character is copied.
template <typename Match>
std::u32string substitute(const std::u32string& s, Match match) {
  std::u32string out;
  out.reserve(s.size() + 16);
  for (size_t i = 0; i < s.size();) {
    const size_t used = match(s, i, out);
    if (used > 0) {
      i += used;
    } else {
      out += s[i++];
    }
  }
  return out;
}

// s/FROM/TO/g for a literal FROM.
std::u32string replace_literal(const std::u32string& s, std::u32string_view from, std::u32string_view to) {
  return substitute(s, [&](const std::u32string& t, size_t i, std::u32string& out) -> size_t {
    if (std::u32string_view(t).substr(i, from.size()) != from) return 0;
    out += to;
    return from.size();
  });
}

bool contains(const std::u32string& s, std::u32string_view what) {
  return s.find(what) != std::u32string::npos;
}

// s/ +/ /g; s/^ //g; s/ $//g
std::u32string squeeze_spaces(const std::u32string& s) {
  std::u32string out;
  for (char32_t c : s)
    if (c != U' ' || out.empty() || out.back() != U' ') out += c;
  if (!out.empty() && out.front() == U' ') out.erase(0, 1);
  if (!out.empty() && out.back() == U' ') out.pop_back();
  return out;
}

// The word loop: "word." splits its period unless it is a known prefix, an
// abbreviation with inner periods, or followed by a lowercase word.
std::u32string split_periods(const std::u32string& text) {
  std::vector<std::u32string> words;  // split(/\s/): leading empties kept, trailing dropped
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == U' ') {
      words.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  while (!words.empty() && words.back().empty()) words.pop_back();
  std::u32string out;
  for (size_t i = 0; i < words.size(); ++i) {
    std::u32string word = words[i];
    if (word.size() >= 2 && word.back() == U'.') {  // /^(\S+)\.$/
      const std::u32string pre = word.substr(0, word.size() - 1);
      const bool last = i + 1 == words.size();
      const bool inner_abbrev =
          contains(pre, U".") && std::any_of(pre.begin(), pre.end(), [](char32_t c) { return is_alpha(c); });
      const bool lower_next = !last && !words[i + 1].empty() && is_lower(words[i + 1][0]);
      if (last || !(inner_abbrev || german_prefixes().count(pre) > 0 || lower_next)) word = pre + U" .";
    }
    out += word + U" ";
  }
  return out;
}

}  // namespace

std::string moses_tokenize_de(std::string_view line) {
  std::u32string in;
  decode_utf8(line, in);
  // tokenize_batch passes lines of nothing but whitespace through unchanged.
  if (std::all_of(in.begin(), in.end(), perl_space)) return std::string(line);
  std::u32string t = U" " + in + U" ";
  // s/\s+/ /g; s/[\000-\037]//g; then the protected-pattern clean-up.
  std::u32string s;
  for (char32_t c : t) {
    if (perl_space(c)) {
      if (s.empty() || s.back() != U' ') s += U' ';
    } else if (c >= 0x20) {
      s += c;
    }
  }
  s = squeeze_spaces(s);
  // s/([^\p{IsAlnum}\s\.\'\`\,\-])/ $1 /g
  t.clear();
  for (char32_t c : s) {
    if (is_alnum(c) || c == U' ' || std::u32string_view(U".'`,-").find(c) != std::u32string_view::npos) {
      t += c;
    } else {
      ((t += U' ') += c) += U' ';
    }
  }
  // multi-dots stay together: s/\.([\.]+)/ DOTMULTI$1/g, then the loop.
  t = substitute(t, [](const std::u32string& x, size_t i, std::u32string& out) -> size_t {
    if (x[i] != U'.' || i + 1 >= x.size() || x[i + 1] != U'.') return 0;
    size_t end = i + 1;
    while (end < x.size() && x[end] == U'.') ++end;
    out += U" DOTMULTI";
    out.append(x, i + 1, end - i - 1);
    return end - i;
  });
  while (contains(t, U"DOTMULTI.")) {
    // s/DOTMULTI\.([^\.])/DOTDOTMULTI $1/g
    t = substitute(t, [](const std::u32string& x, size_t i, std::u32string& out) -> size_t {
      if (std::u32string_view(x).substr(i, 9) != U"DOTMULTI." || i + 9 >= x.size() || x[i + 9] == U'.')
        return 0;
      (out += U"DOTDOTMULTI ") += x[i + 9];
      return 10;
    });
    t = replace_literal(t, U"DOTMULTI.", U"DOTDOTMULTI");
  }
  // s/([^\p{IsN}])[,]/$1 , /g; s/[,]([^\p{IsN}])/ , $1/g; s/([\p{IsN}])[,]$/$1 ,/g
  t = substitute(t, [](const std::u32string& x, size_t i, std::u32string& out) -> size_t {
    if (i + 1 >= x.size() || is_number(x[i]) || x[i + 1] != U',') return 0;
    (out += x[i]) += U" , ";
    return 2;
  });
  t = substitute(t, [](const std::u32string& x, size_t i, std::u32string& out) -> size_t {
    if (i + 1 >= x.size() || x[i] != U',' || is_number(x[i + 1])) return 0;
    (out += U" , ") += x[i + 1];
    return 2;
  });
  if (t.size() >= 2 && t.back() == U',' && is_number(t[t.size() - 2])) t.insert(t.end() - 1, U' ');
  t = replace_literal(t, U"'", U" ' ");  // -l de: every apostrophe is a token
  t = squeeze_spaces(split_periods(t));
  // s/\.\' ?$/ . ' /
  for (std::u32string_view end : {std::u32string_view(U".' "), std::u32string_view(U".'")}) {
    if (t.size() >= end.size() && std::u32string_view(t).substr(t.size() - end.size()) == end) {
      t.replace(t.size() - end.size(), end.size(), U" . ' ");
      break;
    }
  }
  while (contains(t, U"DOTDOTMULTI")) t = replace_literal(t, U"DOTDOTMULTI", U"DOTMULTI.");
  t = replace_literal(t, U"DOTMULTI", U".");
  // XML escaping, in tokenizer.perl's order.
  std::u32string escaped;
  for (char32_t c : t) {
    switch (c) {
      case U'&': escaped += U"&amp;"; break;
      case U'|': escaped += U"&#124;"; break;
      case U'<': escaped += U"&lt;"; break;
      case U'>': escaped += U"&gt;"; break;
      case U'\'': escaped += U"&apos;"; break;
      case U'"': escaped += U"&quot;"; break;
      case U'[': escaped += U"&#91;"; break;
      case U']': escaped += U"&#93;"; break;
      default: escaped += c;
    }
  }
  return to_utf8(escaped);
}

std::string split_compounds(std::string_view line) {
  // Bytes, as perl -ple reads them: \S is any byte but ASCII whitespace.
  const auto non_space = [](char c) { return std::string_view(" \t\n\v\f\r").find(c) == std::string_view::npos; };
  std::string out;
  out.reserve(line.size() + 32);
  size_t i = 0;
  for (; i + 2 < line.size(); ++i) {
    if (non_space(line[i]) && line[i + 1] == '-' && non_space(line[i + 2])) {
      ((out += line[i]) += " ##AT##-##AT## ") += line[i + 2];
      i += 2;
    } else {
      out += line[i];
    }
  }
  out.append(line.substr(i));
  return out;
}

namespace {

// After tokenizer.perl every whitespace character is a plain space, so
// multi-bleu.perl's split on ASCII whitespace and tfm's split agree.
std::string paper_preprocess(const std::string& line) {
  return split_compounds(moses_tokenize_de(line));
}

}  // namespace

BleuScore paper_bleu(const std::vector<std::string>& hyps,
                     const std::vector<std::vector<std::string>>& refs) {
  std::vector<BleuStats> per(hyps.size());
  for_each_segment(hyps.size(), [&](size_t i) {
    thread_local std::vector<std::string> seg_refs;
    seg_refs.resize(refs.size());
    for (size_t r = 0; r < refs.size(); ++r) seg_refs[r] = paper_preprocess(refs[r][i]);
    per[i] = bleu_segment_stats(paper_preprocess(hyps[i]), seg_refs, 4);
  });
  BleuStats sum(4);
  for (const BleuStats& s : per) sum += s;
  // multi-bleu.perl: precisions as fractions, my_log floored, sum in order.
  BleuScore s;
  s.sys_len = sum.sys_len;
  s.ref_len = sum.ref_len;
  s.counts.assign(sum.correct.begin(), sum.correct.end());
  s.totals.assign(sum.total.begin(), sum.total.end());
  double log_sum = 0;
  for (int n = 0; n < 4; ++n) {
    const double p = sum.total[n] ? static_cast<double>(sum.correct[n]) / static_cast<double>(sum.total[n]) : 0;
    s.precisions.push_back(100 * p);
    log_sum += p == 0 ? -9999999999.0 : std::log(p);
  }
  s.bp = 1;
  if (s.sys_len < s.ref_len)
    s.bp = s.sys_len > 0 ? std::exp(1 - static_cast<double>(s.ref_len) / static_cast<double>(s.sys_len)) : 0;
  s.ratio = s.ref_len ? static_cast<double>(s.sys_len) / static_cast<double>(s.ref_len) : 0;
  s.score = 100 * (s.bp * std::exp(log_sum / 4));
  return s;
}

}  // namespace tfm::eval
