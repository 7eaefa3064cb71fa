// Piece -> id for tfm-batch's hot loop: an open-addressing hash table over
// the vocabulary's pieces, built once. SentencePiece's own PieceToId goes
// through a std::unordered_map<std::string, ...> (a std::string hash, a
// pointer chase and a memcmp call per piece); here a lookup is one hash of
// the piece's bytes and usually one 32-byte slot, which holds the id and,
// for a piece of up to 16 bytes, the two words the hash was made from: the
// compare needs no call, no byte loop and no second cache line.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tfm {

class Vocab;

// The bytes of a piece as two words and its length. For up to 16 bytes the
// words hold every byte (in at most four overlapping 4-byte reads, as in
// wyhash), so (a, b, size) equal means the bytes are equal.
struct PieceWords {
  static constexpr uint64_t kSeed0 = 0xa0761d6478bd642full, kSeed1 = 0xe7037ed1a0b428dbull;
  static constexpr uint64_t kSeed2 = 0x8ebc6af09c88c6e3ull;  // never let a word multiply unmixed
  uint64_t a = 0, b = 0;
  uint64_t seed = kSeed2;  // and the bytes before the last 16, in longer pieces
  size_t size = 0;

  PieceWords() = default;
  explicit PieceWords(std::string_view s) : size(s.size()) {
    const char* p = s.data();
    const size_t n = s.size();
    if (n <= 16) {
      if (n >= 4) {
        const size_t q = (n >> 3) << 2;
        a = load32(p) << 32 | load32(p + q);
        b = load32(p + n - 4) << 32 | load32(p + n - 4 - q);
      } else if (n > 0) {
        a = uint64_t(uint8_t(p[0])) << 16 | uint64_t(uint8_t(p[n >> 1])) << 8 | uint8_t(p[n - 1]);
      }
    } else {
      size_t i = n;
      for (; i > 16; i -= 16, p += 16) seed = mix(load64(p) ^ kSeed1, load64(p + 8) ^ seed);
      a = load64(p + i - 16);
      b = load64(p + i - 8);
    }
  }
  // A 64-bit hash (not stable across versions: for in-memory tables only).
  uint64_t hash() const { return mix(kSeed1 ^ size, mix(a ^ kSeed1, b ^ seed) ^ kSeed0); }

  static uint64_t mix(uint64_t x, uint64_t y) {
    const unsigned __int128 r = static_cast<unsigned __int128>(x) * y;
    return uint64_t(r) ^ uint64_t(r >> 64);
  }

 private:
  static uint64_t load64(const char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  static uint64_t load32(const char* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
};

inline uint64_t piece_hash(std::string_view bytes) { return PieceWords(bytes).hash(); }

class PieceTable {
 public:
  // pieces[i] gets id i; a piece listed twice keeps its first id.
  PieceTable(const std::vector<std::string_view>& pieces, int32_t unk_id);
  // Every piece of `vocab`, with its id, and its unknown id.
  static PieceTable of(const Vocab& vocab);

  // The id of `piece`, or -1 when it is not in the table.
  int32_t find(std::string_view piece) const { return probe(PieceWords(piece), piece); }
  // ids[i] = find(pieces[i]) for i < n, with the pieces hashed and their
  // slots prefetched a group at a time, so that the cache misses of the
  // lookups overlap instead of following one another.
  void find_many(const std::string_view* pieces, size_t n, int32_t* ids) const;

  // The id the vocabulary gives a piece it does not hold.
  int32_t unk_id() const { return unk_id_; }
  std::string_view piece(int32_t id) const {
    return {bytes_.data() + offsets_[size_t(id)], offsets_[size_t(id) + 1] - offsets_[size_t(id)]};
  }
  size_t size() const { return offsets_.size() - 1; }
  // Whether every piece is valid UTF-8 (then a line made of known pieces and
  // spaces is valid UTF-8 without looking at its bytes again).
  bool all_valid_utf8() const { return all_valid_utf8_; }

 private:
  // One entry, 32 bytes, so a lookup that finds its slot needs no other
  // memory: the id, the hash's top 32 bits, the size, and the words of the
  // piece (all of it when size <= 16; longer pieces compare bytes_).
  struct alignas(32) Slot {
    uint32_t id_plus_1 = 0;  // 0: empty
    uint32_t tag = 0;
    uint64_t size = 0, a = 0, b = 0;
  };
  static constexpr size_t kGroup = 16;  // pieces hashed ahead in find_many

  int32_t probe(const PieceWords& w, std::string_view piece) const {
    const uint64_t h = w.hash();
    return probe(w, uint32_t(h >> 32), size_t(h) & mask_, piece);
  }
  int32_t probe(const PieceWords& w, uint32_t tag, size_t i, std::string_view piece) const {
    for (;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id_plus_1 == 0) return -1;
      if (s.tag == tag && s.size == w.size && s.a == w.a && s.b == w.b &&
          (w.size <= 16 || this->piece(int32_t(s.id_plus_1 - 1)) == piece))
        return int32_t(s.id_plus_1 - 1);
    }
  }

  std::string bytes_;              // the pieces back to back
  std::vector<uint32_t> offsets_;  // piece i is bytes_[offsets_[i], offsets_[i + 1])
  std::vector<Slot> slots_;        // at most 2/3 full
  size_t mask_ = 0;
  int32_t unk_id_;
  bool all_valid_utf8_ = true;
};

// Whether `s` is valid UTF-8: no overlong forms, surrogates or code points
// past U+10FFFF. Runs of ASCII are checked eight bytes at a time.
bool valid_utf8(std::string_view s);

}  // namespace tfm
