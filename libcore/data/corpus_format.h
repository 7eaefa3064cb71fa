// Internal to the corpus code; not part of the libcore API. The .tfmb byte
// layout (man/tfm-batch.1, "FILE FORMAT"), written by Corpus::write and read
// by Corpus::read (corpus.cc): each record's fields and offsets stated once,
// as one encode and one decode, so that the two halves cannot drift apart
// (checkpoint_format.h does the same for checkpoints).
//
//   header (128 bytes, CRC-32 last) | block index | batch table | blocks
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "libcore/data/batcher.h"
#include "libcore/io/checkpoint_format.h"

namespace tfm::corpus_format {

using io::detail::get;
using io::detail::put;

inline constexpr std::array<unsigned char, 8> kMagic = {0x89, 'T', 'F', 'M', 'B', 'A', 'T', 'C'};
inline constexpr size_t kHeaderBytes = 128;
inline constexpr size_t kFingerprintAt = 80, kFingerprintBytes = 44;  // header bytes 80..123
inline constexpr size_t kIndexEntry = 32, kBatchEntry = 8;
inline constexpr uint32_t kBlockPairs = 4096;  // pairs per zstd block (the last may hold fewer)

// The header's fields (their byte offsets: for_each_header_field).
struct Header {
  uint32_t version = 0;
  uint32_t width = 0;  // bytes an id takes, 2 or 4
  uint64_t file_bytes = 0, pairs = 0;
  uint64_t src_tokens = 0, tgt_tokens = 0;
  uint64_t vocab_size = 0, max_tokens = 0;
  uint32_t max_len = 0, block_count = 0, batch_count = 0;
  uint32_t table_crc = 0;  // of the block index and batch table together
  // Bytes 80..123: the vocabulary's fingerprint, NUL-padded; decode gives
  // all 44 bytes (the reader checks the padding), encode takes under 44.
  std::string fingerprint;
};

// Every numeric field of the header with its byte offset, for encode and
// decode alike: f(field, offset).
template <typename H, typename F>
void for_each_header_field(H& h, F&& f) {
  f(h.version, 8), f(h.width, 12), f(h.file_bytes, 16), f(h.pairs, 24);
  f(h.src_tokens, 32), f(h.tgt_tokens, 40), f(h.vocab_size, 48), f(h.max_tokens, 56);
  f(h.max_len, 64), f(h.block_count, 68), f(h.batch_count, 72), f(h.table_crc, 76);
}

// f(field, offset) that reads each field from the record at p.
inline auto read_from(const unsigned char* p) {
  return [p](auto& v, size_t at) { v = get<std::remove_reference_t<decltype(v)>>(p + at); };
}

// Little-endian v at byte `at` of out (which holds it already).
template <typename T>
void put_at(std::string& out, size_t at, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out[at + i] = static_cast<char>((uint64_t{v} >> (8 * i)) & 0xff);
}

// The 128 bytes of the header, its CRC-32 over the first 124 last.
inline std::string encode_header(const Header& h) {
  std::string out(kHeaderBytes - 4, '\0');
  std::copy(kMagic.begin(), kMagic.end(), out.begin());
  for_each_header_field(h, [&](auto v, size_t at) { put_at(out, at, v); });
  out.replace(kFingerprintAt, h.fingerprint.size(), h.fingerprint);
  put<uint32_t>(out, io::detail::crc32(0, out.data(), out.size()));
  return out;
}
// The fields of kHeaderBytes bytes at p (magic and CRC are the reader's).
inline Header decode_header(const unsigned char* p) {
  Header h;
  for_each_header_field(h, read_from(p));
  h.fingerprint.assign(reinterpret_cast<const char*>(p + kFingerprintAt), kFingerprintBytes);
  return h;
}
inline uint32_t header_crc(const unsigned char* p) { return get<uint32_t>(p + kHeaderBytes - 4); }

// One block's entry in the index.
struct IndexEntry {
  uint64_t offset = 0, stored = 0;  // where its zstd bytes lie, and how many
  uint32_t raw_bytes = 0, pairs = 0;
  uint32_t crc_stored = 0, crc_raw = 0;  // of the zstd bytes, of the decompressed bytes
};
// Its fields with their byte offsets in the entry, for encode and decode alike.
template <typename E, typename F>
void for_each_index_field(E& e, F&& f) {
  f(e.offset, 0), f(e.stored, 8), f(e.raw_bytes, 16);
  f(e.pairs, 20), f(e.crc_stored, 24), f(e.crc_raw, 28);
}
inline void encode_index_entry(std::string& out, const IndexEntry& e) {
  const size_t at = out.size();
  out.resize(at + kIndexEntry, '\0');
  for_each_index_field(e, [&](auto v, size_t offset) { put_at(out, at + offset, v); });
}
inline IndexEntry decode_index_entry(const unsigned char* p) {
  IndexEntry e;
  for_each_index_field(e, read_from(p));
  return e;
}

// One batch of the table: pairs [first, first + count) in bucket order.
inline void encode_batch(std::string& out, const BatchRange& r) {
  put<uint32_t>(out, r.first);
  put<uint32_t>(out, r.count);
}
inline BatchRange decode_batch(const unsigned char* p) { return {get<uint32_t>(p), get<uint32_t>(p + 4)}; }

}  // namespace tfm::corpus_format
