// Internal to the corpus code; not part of the libcore API. The .tfmb byte
// layout (man/tfm-batch.1, "FILE FORMAT"), written by Corpus::write and read
// by Corpus::read (corpus.cc): each record's fields and offsets stated once,
// as one encode and one decode, so that the two halves cannot drift apart
// (checkpoint_format.h does the same for checkpoints).
//
//   header (128 bytes, CRC-32 last) | block index | batch table | blocks
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

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

// The header's fields, in their order in the file.
struct Header {
  uint32_t version = 0;     // bytes 8..11 (after the magic)
  uint32_t width = 0;       // 12: bytes an id takes, 2 or 4
  uint64_t file_bytes = 0;  // 16
  uint64_t pairs = 0;       // 24
  uint64_t src_tokens = 0, tgt_tokens = 0;  // 32, 40
  uint64_t vocab_size = 0, max_tokens = 0;  // 48, 56
  uint32_t max_len = 0, block_count = 0, batch_count = 0;  // 64, 68, 72
  uint32_t table_crc = 0;  // 76: of the block index and batch table together
  // 80..123: the vocabulary's fingerprint, NUL-padded; decode gives all 44
  // bytes (the reader checks the padding), encode takes under 44.
  std::string fingerprint;
};

// The 128 bytes of the header, its CRC-32 over the first 124 last.
inline std::string encode_header(const Header& h) {
  std::string out(reinterpret_cast<const char*>(kMagic.data()), kMagic.size());
  put<uint32_t>(out, h.version);
  put<uint32_t>(out, h.width);
  put<uint64_t>(out, h.file_bytes);
  put<uint64_t>(out, h.pairs);
  put<uint64_t>(out, h.src_tokens);
  put<uint64_t>(out, h.tgt_tokens);
  put<uint64_t>(out, h.vocab_size);
  put<uint64_t>(out, h.max_tokens);
  put<uint32_t>(out, h.max_len);
  put<uint32_t>(out, h.block_count);
  put<uint32_t>(out, h.batch_count);
  put<uint32_t>(out, h.table_crc);
  out += h.fingerprint;
  out.resize(kHeaderBytes - 4, '\0');
  put<uint32_t>(out, io::detail::crc32(0, out.data(), out.size()));
  return out;
}
// The fields of kHeaderBytes bytes at p (magic and CRC are the reader's).
inline Header decode_header(const unsigned char* p) {
  Header h;
  h.version = get<uint32_t>(p + 8);
  h.width = get<uint32_t>(p + 12);
  h.file_bytes = get<uint64_t>(p + 16);
  h.pairs = get<uint64_t>(p + 24);
  h.src_tokens = get<uint64_t>(p + 32);
  h.tgt_tokens = get<uint64_t>(p + 40);
  h.vocab_size = get<uint64_t>(p + 48);
  h.max_tokens = get<uint64_t>(p + 56);
  h.max_len = get<uint32_t>(p + 64);
  h.block_count = get<uint32_t>(p + 68);
  h.batch_count = get<uint32_t>(p + 72);
  h.table_crc = get<uint32_t>(p + 76);
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
inline void encode_index_entry(std::string& out, const IndexEntry& e) {
  put<uint64_t>(out, e.offset);
  put<uint64_t>(out, e.stored);
  put<uint32_t>(out, e.raw_bytes);
  put<uint32_t>(out, e.pairs);
  put<uint32_t>(out, e.crc_stored);
  put<uint32_t>(out, e.crc_raw);
}
inline IndexEntry decode_index_entry(const unsigned char* p) {
  return {get<uint64_t>(p), get<uint64_t>(p + 8), get<uint32_t>(p + 16), get<uint32_t>(p + 20),
          get<uint32_t>(p + 24), get<uint32_t>(p + 28)};
}

// One batch of the table: pairs [first, first + count) in bucket order.
inline void encode_batch(std::string& out, const BatchRange& r) {
  put<uint32_t>(out, r.first);
  put<uint32_t>(out, r.count);
}
inline BatchRange decode_batch(const unsigned char* p) { return {get<uint32_t>(p), get<uint32_t>(p + 4)}; }

}  // namespace tfm::corpus_format
