#include "libcore/data/piece_table.h"

#include <algorithm>
#include <cstring>

#include "libcore/base/error.h"
#include "libcore/data/vocab.h"

namespace tfm {

namespace {

uint64_t load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

PieceTable::PieceTable(const std::vector<std::string_view>& pieces, int32_t unk_id)
    : unk_id_(unk_id) {
  TFM_REQUIRE(pieces.size() < (size_t{1} << 31), "a vocabulary of {} pieces is too large",
              pieces.size());
  offsets_.reserve(pieces.size() + 1);
  offsets_.push_back(0);
  for (const std::string_view p : pieces) {
    bytes_ += p;
    TFM_REQUIRE(bytes_.size() <= UINT32_MAX, "the vocabulary's pieces are over 4 GiB");
    offsets_.push_back(uint32_t(bytes_.size()));
    all_valid_utf8_ = all_valid_utf8_ && valid_utf8(p);
  }
  size_t capacity = 16;
  while (capacity * 2 < pieces.size() * 3) capacity *= 2;  // at most 2/3 full
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  for (size_t id = 0; id < pieces.size(); ++id) {
    const std::string_view p = piece(int32_t(id));
    const PieceWords w(p);
    if (probe(w, p) >= 0) continue;  // listed twice: keep the first
    const uint64_t h = w.hash();
    size_t i = size_t(h) & mask_;
    while (slots_[i].id_plus_1 != 0) i = (i + 1) & mask_;
    slots_[i] = Slot{uint32_t(id + 1), uint32_t(h >> 32), w.size, w.a, w.b};
  }
}

void PieceTable::find_many(const std::string_view* pieces, size_t n, int32_t* ids) const {
  struct Ahead {
    PieceWords w;
    uint64_t h;
  } ahead[kGroup];
  for (size_t start = 0; start < n; start += kGroup) {
    const size_t m = std::min(kGroup, n - start);
    for (size_t k = 0; k < m; ++k) {
      ahead[k].w = PieceWords(pieces[start + k]);
      ahead[k].h = ahead[k].w.hash();
      __builtin_prefetch(&slots_[size_t(ahead[k].h) & mask_]);
    }
    for (size_t k = 0; k < m; ++k)
      ids[start + k] = probe(ahead[k].w, uint32_t(ahead[k].h >> 32), size_t(ahead[k].h) & mask_,
                             pieces[start + k]);
  }
}

PieceTable PieceTable::of(const Vocab& vocab) {
  std::vector<std::string_view> pieces(size_t(vocab.size()));
  for (size_t i = 0; i < pieces.size(); ++i) pieces[i] = vocab.piece(int32_t(i));
  return PieceTable(pieces, vocab.unk_id());
}

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    if (n - i >= 8 && (load64(s.data() + i) & 0x8080808080808080ull) == 0) {
      i += 8;  // eight ASCII bytes
      continue;
    }
    const unsigned c = p[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
    else return false;
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = cp << 6 | (p[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are invalid.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

}  // namespace tfm
