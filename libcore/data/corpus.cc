// .tfmb writer and reader; the byte layout is man/tfm-batch.1, "FILE FORMAT":
//   header (128 bytes, CRC-32) | block index | batch table | blocks
// The index and batch table share one CRC-32 in the header; every block has
// a CRC-32 of its stored (zstd) bytes and one of its decompressed bytes.
#include "libcore/data/corpus.h"

#include <sys/stat.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>

#include "libcore/data/pipeline.h"
#include "libcore/progress.h"
#include "libcore/error.h"
#include "libcore/io/atomic_file.h"
#include "libcore/io/checkpoint_format.h"
#include "libcore/io/read_file.h"

namespace tfm {

using io::detail::crc32;
using io::detail::get;
using io::detail::put;

namespace {

constexpr std::array<unsigned char, 8> kMagic = {0x89, 'T', 'F', 'M', 'B', 'A', 'T', 'C'};
constexpr size_t kHeaderBytes = 128;
constexpr size_t kFingerprintBytes = 44;  // header bytes 80..123
constexpr size_t kIndexEntry = 32, kBatchEntry = 8;
constexpr uint32_t kBlockPairs = 4096;    // pairs per zstd block
constexpr uint64_t kZstdMaxRatio = io::detail::kZstdMaxRatio;
constexpr int kZstdLevel = 1;                       // see man/tfm-batch.1, "FILE FORMAT"
constexpr uint64_t kWritebackBytes = uint64_t{16} << 20;  // start writing to disk this often

template <typename... Args>
[[noreturn]] void corrupt(const std::string& path, fmt::format_string<Args...> format,
                          Args&&... args) {
  fail("{} is corrupt: {}", path, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace

// ---- writing ----

namespace {

struct ZstdCFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};

// One block on its way to the file: raw bytes in, stored bytes out.
struct Block {
  uint32_t index = 0, pairs = 0;
  std::string raw, stored;
  uint32_t crc_raw = 0, crc_stored = 0;
  std::unique_ptr<ZSTD_CCtx, ZstdCFree> cctx;
};

// The largest of n ids, `width` bytes each.
uint32_t max_id(const unsigned char* ids, size_t n, int width) {
  uint32_t m = 0;
  if (width == 2) {
    for (size_t k = 0; k < n; ++k) m = std::max<uint32_t>(m, get<uint16_t>(ids + 2 * k));
  } else {
    for (size_t k = 0; k < n; ++k) m = std::max(m, get<uint32_t>(ids + 4 * k));
  }
  return m;
}

// Turns block numbers into raw and stored bytes; one per write_corpus, shared
// by its threads (each with its own Block).
struct BlockEncoder {
  const std::string& path;
  const CorpusMeta& meta;
  const PairStore& pairs;
  const std::vector<uint32_t>& order;     // input index of each sorted pair
  const std::vector<PairLength>& sorted;  // their lengths

  void operator()(Block& b) const {
    gather(b);
    check_ids(b);
    if (!b.cctx) b.cctx.reset(ZSTD_createCCtx());
    if (!b.cctx) fail("cannot write {}: out of memory for zstd", path);
    b.stored.resize(ZSTD_compressBound(b.raw.size()));
    const size_t n = ZSTD_compressCCtx(b.cctx.get(), b.stored.data(), b.stored.size(),
                                       b.raw.data(), b.raw.size(), kZstdLevel);
    if (ZSTD_isError(n)) fail("cannot write {}: zstd: {}", path, ZSTD_getErrorName(n));
    b.stored.resize(n);
    b.crc_raw = crc32(0, b.raw.data(), b.raw.size());
    b.crc_stored = crc32(0, b.stored.data(), b.stored.size());
  }

 private:
  size_t first(const Block& b) const { return size_t{b.index} * kBlockPairs; }
  size_t ids(size_t k) const { return size_t(sorted[k].src + sorted[k].tgt); }

  // The raw bytes: lengths, then each pair's ids. The pairs lie in input
  // order in `pairs`, so this is a gather from all over memory: the pairs a
  // few places ahead are prefetched.
  void gather(Block& b) const {
    constexpr size_t kAhead = 8;
    const size_t lo = first(b), hi = std::min(order.size(), lo + kBlockPairs);
    const size_t width = size_t(pairs.id_bytes());
    b.pairs = uint32_t(hi - lo);
    b.raw.clear();
    for (size_t k = lo; k < hi; ++k) {
      put<uint16_t>(b.raw, uint16_t(sorted[k].src));
      put<uint16_t>(b.raw, uint16_t(sorted[k].tgt));
    }
    for (size_t k = lo; k < hi; ++k) {
      if (k + kAhead < hi) {
        const auto* next = reinterpret_cast<const char*>(pairs.packed(order[k + kAhead]));
        for (size_t at = 0; at < ids(k + kAhead) * width + 63; at += 64) __builtin_prefetch(next + at);
      }
      b.raw.append(reinterpret_cast<const char*>(pairs.packed(order[k])), ids(k) * width);
    }
  }

  // Every id below the vocabulary size; the pair named when one is not.
  void check_ids(const Block& b) const {
    const int width = pairs.id_bytes();
    const size_t lengths_bytes = size_t{b.pairs} * 4;
    const auto* raw_ids = reinterpret_cast<const unsigned char*>(b.raw.data()) + lengths_bytes;
    if (max_id(raw_ids, (b.raw.size() - lengths_bytes) / size_t(width), width) < meta.vocab_size)
      return;
    for (size_t k = first(b); k < first(b) + b.pairs; ++k)
      if (const uint32_t m = max_id(pairs.packed(order[k]), ids(k), width); m >= meta.vocab_size)
        fail("cannot write {}: pair {} holds id {}, outside the vocabulary of {}", path, order[k],
             m, meta.vocab_size);
  }
};

}  // namespace

CorpusSummary write_corpus(const std::string& path, const CorpusMeta& meta, const PairStore& pairs,
                           const CorpusWriteOptions& options) {
  TFM_REQUIRE(meta.fingerprint.size() < kFingerprintBytes,
              "cannot write {}: vocabulary fingerprint '{}' is longer than {} bytes", path,
              meta.fingerprint, kFingerprintBytes - 1);
  TFM_REQUIRE(meta.max_len >= 1 && meta.max_len <= kCorpusMaxLen,
              "cannot write {}: max length {} is outside 1..{}", path, meta.max_len, kCorpusMaxLen);
  TFM_REQUIRE(meta.max_tokens >= 1, "cannot write {}: max tokens must be positive", path);
  TFM_REQUIRE(meta.vocab_size >= 4 && meta.vocab_size <= INT32_MAX,
              "cannot write {}: vocabulary size {} is out of range", path, meta.vocab_size);
  TFM_REQUIRE(pairs.vocab_size() == meta.vocab_size,
              "cannot write {}: the pairs were read for a vocabulary of {}, not {}", path,
              pairs.vocab_size(), meta.vocab_size);
  TFM_REQUIRE(pairs.size() < UINT32_MAX, "cannot write {}: too many pairs", path);
  const std::vector<PairLength>& lengths = pairs.lengths();
  for (size_t i = 0; i < lengths.size(); ++i)
    for (const int32_t len : {lengths[i].src, lengths[i].tgt})
      TFM_REQUIRE(len >= 1 && len <= meta.max_len,
                  "cannot write {}: pair {} has a side of {} tokens, outside 1..{}", path, i, len,
                  meta.max_len);
  const std::vector<uint32_t> order = bucket_order(lengths);
  std::vector<PairLength> sorted(order.size());
  for (size_t k = 0; k < order.size(); ++k) sorted[k] = lengths[order[k]];
  const std::vector<BatchRange> batches = pack_batches(sorted, meta.max_tokens);

  const int width = pairs.id_bytes();
  const uint32_t block_count = uint32_t((order.size() + kBlockPairs - 1) / kBlockPairs);
  const uint64_t data_start = kHeaderBytes + kIndexEntry * block_count + kBatchEntry * batches.size();
  io::AtomicFile file(path);
  file.write(std::string(size_t(data_start), '\0'));  // header and tables, filled in last
  std::string index;
  uint32_t next = 0;
  uint64_t unsynced = 0;
  const double write_start = options.progress ? options.progress->seconds() : 0;
  run_ordered<Block>(
      thread_count(options.threads),
      [&](Block& b) {
        if (next == block_count) return false;
        b.index = next++;
        return true;
      },
      BlockEncoder{path, meta, pairs, order, sorted},
      [&](const Block& b) {
        put<uint64_t>(index, file.pos());
        put<uint64_t>(index, b.stored.size());
        put<uint32_t>(index, uint32_t(b.raw.size()));
        put<uint32_t>(index, b.pairs);
        put<uint32_t>(index, b.crc_stored);
        put<uint32_t>(index, b.crc_raw);
        file.write(b.stored);
        if (options.progress && options.progress->due())
          options.progress->report(
              fmt::format("writing {}: block {} of {} ({:.0f}%) | ETA {}", path, b.index + 1, block_count,
                          100.0 * double(b.index + 1) / double(block_count),
                          format_eta(eta_seconds(double(b.index + 1), double(block_count),
                                                 options.progress->seconds() - write_start))),
              true);
        if ((unsynced += b.stored.size()) >= kWritebackBytes) {
          file.start_writeback();  // the disk works while the next blocks compress
          unsynced = 0;
        }
      });
  for (const BatchRange& r : batches) {
    put<uint32_t>(index, r.first);
    put<uint32_t>(index, r.count);
  }
  std::string out;
  out.append(reinterpret_cast<const char*>(kMagic.data()), kMagic.size());
  put<uint32_t>(out, kCorpusVersion);
  put<uint32_t>(out, uint32_t(width));
  put<uint64_t>(out, file.pos());
  put<uint64_t>(out, order.size());
  put<uint64_t>(out, uint64_t(pairs.src_tokens()));
  put<uint64_t>(out, uint64_t(pairs.tgt_tokens()));
  put<uint64_t>(out, uint64_t(meta.vocab_size));
  put<uint64_t>(out, uint64_t(meta.max_tokens));
  put<uint32_t>(out, uint32_t(meta.max_len));
  put<uint32_t>(out, block_count);
  put<uint32_t>(out, uint32_t(batches.size()));
  put<uint32_t>(out, crc32(0, index.data(), index.size()));
  out += meta.fingerprint;
  out.resize(kHeaderBytes - 4, '\0');
  put<uint32_t>(out, crc32(0, out.data(), out.size()));
  out += index;
  file.write_at(0, out.data(), out.size());
  const uint64_t bytes = file.pos();
  file.commit();
  return {bytes, packing_stats(sorted, batches)};
}

// ---- reading ----

Corpus Corpus::read(const std::string& path) {
  const std::string file = io::read_file(path);
  const auto* p = reinterpret_cast<const unsigned char*>(file.data());
  const size_t have = file.size();
  if (have == 0) fail("{} is empty, not a tfm corpus (.tfmb)", path);
  if (std::memcmp(p, kMagic.data(), std::min(have, kMagic.size())) != 0)
    fail("{} is not a tfm corpus (.tfmb)", path);
  if (have < 12) fail("{} is truncated: it ends inside its header", path);
  Corpus c;
  c.version_ = get<uint32_t>(p + 8);
  if (c.version_ < kCorpusVersion)
    fail("{} is a tfm corpus of format version {}, which this tfm no longer reads (it reads "
         "version {}): make it again with tfm-batch", path, c.version_, kCorpusVersion);
  if (c.version_ > kCorpusVersion)
    fail("{} is a tfm corpus of format version {}, but this tfm reads only version {}", path,
         c.version_, kCorpusVersion);
  if (have < kHeaderBytes) fail("{} is truncated: it ends inside its header", path);
  if (crc32(0, p, kHeaderBytes - 4) != get<uint32_t>(p + kHeaderBytes - 4))
    corrupt(path, "its header fails its checksum");
  const uint64_t file_bytes = get<uint64_t>(p + 16), pairs = get<uint64_t>(p + 24);
  const uint64_t src_tokens = get<uint64_t>(p + 32), tgt_tokens = get<uint64_t>(p + 40);
  const uint64_t vocab_size = get<uint64_t>(p + 48), max_tokens = get<uint64_t>(p + 56);
  const uint32_t max_len = get<uint32_t>(p + 64), block_count = get<uint32_t>(p + 68);
  const uint32_t batch_count = get<uint32_t>(p + 72), table_crc = get<uint32_t>(p + 76);
  const uint32_t width = get<uint32_t>(p + 12);
  if (have < file_bytes)
    fail("{} is truncated: it has {} bytes, but its header says {}", path, have, file_bytes);
  if (have > file_bytes) corrupt(path, "it has {} bytes, but its header says {}", have, file_bytes);
  if (vocab_size < 4 || vocab_size > INT32_MAX) corrupt(path, "its vocabulary size {} is out of range", vocab_size);
  if (width != uint32_t(id_bytes_for(int64_t(vocab_size))))
    corrupt(path, "its ids are {} bytes wide, but a vocabulary of {} takes {}", width, vocab_size,
            id_bytes_for(int64_t(vocab_size)));
  if (max_len < 1 || max_len > uint32_t(kCorpusMaxLen)) corrupt(path, "its max length {} is outside 1..{}", max_len, kCorpusMaxLen);
  if (max_tokens < 1 || max_tokens > INT64_MAX) corrupt(path, "its max tokens {} is out of range", max_tokens);
  if (pairs >= UINT32_MAX || block_count != (pairs + kBlockPairs - 1) / kBlockPairs ||
      batch_count > pairs)
    corrupt(path, "its counts of pairs ({}), blocks ({}) and batches ({}) do not fit together",
            pairs, block_count, batch_count);
  const char* fp = file.data() + 80;
  const size_t fp_len = strnlen(fp, kFingerprintBytes);
  if (fp_len == kFingerprintBytes || std::any_of(fp + fp_len, fp + kFingerprintBytes, [](char ch) { return ch; }))
    corrupt(path, "its vocabulary fingerprint is not a NUL-padded string");
  c.meta_ = CorpusMeta{std::string(fp, fp_len), int64_t(vocab_size), int32_t(max_len), int64_t(max_tokens)};
  const uint64_t table_bytes = kIndexEntry * uint64_t{block_count} + kBatchEntry * uint64_t{batch_count};
  if (table_bytes > file_bytes - kHeaderBytes)
    corrupt(path, "its block index and batch table run past its end");
  if (crc32(0, p + kHeaderBytes, size_t(table_bytes)) != table_crc)
    corrupt(path, "its block index or batch table fails its checksum");

  c.lengths_.reserve(size_t(pairs));
  c.offsets_.reserve(size_t(pairs));
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!dctx) fail("cannot read {}: out of memory for zstd", path);
  uint64_t next = kHeaderBytes + table_bytes, seen = 0, src_seen = 0, tgt_seen = 0;
  std::string raw;
  for (uint32_t b = 0; b < block_count; ++b) {
    const unsigned char* e = p + kHeaderBytes + kIndexEntry * b;
    const uint64_t offset = get<uint64_t>(e), stored = get<uint64_t>(e + 8);
    const uint32_t raw_bytes = get<uint32_t>(e + 16), n = get<uint32_t>(e + 20);
    if (offset != next || stored > file_bytes - next)
      corrupt(path, "block {} does not lie right after the one before it", b);
    next += stored;
    const uint32_t want_n = b + 1 < block_count ? kBlockPairs : uint32_t(pairs - seen);
    if (n != want_n) corrupt(path, "block {} holds {} pairs instead of {}", b, n, want_n);
    if (raw_bytes > uint64_t{n} * (4 + 2 * width * uint64_t{max_len}) || raw_bytes / kZstdMaxRatio > stored)
      corrupt(path, "block {} claims {} bytes, more than it can hold", b, raw_bytes);
    if (crc32(0, p + offset, size_t(stored)) != get<uint32_t>(e + 24))
      corrupt(path, "block {} fails its checksum", b);
    raw.assign(raw_bytes, '\0');
    const size_t got = ZSTD_decompressDCtx(dctx.get(), raw.data(), raw.size(), p + offset, size_t(stored));
    if (ZSTD_isError(got))
      corrupt(path, "block {} cannot be decompressed (zstd: {})", b, ZSTD_getErrorName(got));
    if (got != raw_bytes) corrupt(path, "block {} does not decompress to the {} bytes its index says", b, raw_bytes);
    if (crc32(0, raw.data(), raw.size()) != get<uint32_t>(e + 28))
      corrupt(path, "block {} fails its checksum after decompression", b);
    const auto* r = reinterpret_cast<const unsigned char*>(raw.data());
    if (raw_bytes < uint64_t{n} * 4) corrupt(path, "block {} is too short for its lengths", b);
    uint64_t ids = 0;
    for (uint32_t k = 0; k < n; ++k) {
      const uint32_t s = get<uint16_t>(r + 4 * k), t = get<uint16_t>(r + 4 * k + 2);
      if (s < 1 || s > max_len || t < 1 || t > max_len)
        corrupt(path, "pair {} has lengths {} and {}, outside 1..{}", seen + k, s, t, max_len);
      ids += s + t;
      src_seen += s;
      tgt_seen += t;
    }
    if (raw_bytes != uint64_t{n} * 4 + ids * width)
      corrupt(path, "block {} holds {} bytes, but its lengths need {}", b, raw_bytes,
              n * 4 + ids * width);
    const size_t base = c.ids_.size();
    c.ids_.resize(base + size_t(ids));
    const unsigned char* id_bytes = r + uint64_t{n} * 4;
    for (uint64_t k = 0; k < ids; ++k) {
      const uint32_t id = width == 2 ? get<uint16_t>(id_bytes + 2 * k) : get<uint32_t>(id_bytes + 4 * k);
      if (id >= vocab_size) corrupt(path, "block {} holds id {}, outside the vocabulary of {}", b, id, vocab_size);
      c.ids_[base + size_t(k)] = int32_t(id);
    }
    uint64_t off = base;
    for (uint32_t k = 0; k < n; ++k) {
      const PairLength len{int32_t(get<uint16_t>(r + 4 * k)), int32_t(get<uint16_t>(r + 4 * k + 2))};
      if (!c.lengths_.empty() && bucket_key(len) < bucket_key(c.lengths_.back()))
        corrupt(path, "pair {} is out of bucket order", seen + k);
      c.lengths_.push_back(len);
      c.offsets_.push_back(off);
      off += uint64_t(len.src + len.tgt);
    }
    seen += n;
  }
  if (next != file_bytes) corrupt(path, "its blocks do not reach its end");
  if (src_seen != src_tokens || tgt_seen != tgt_tokens)
    corrupt(path, "it holds {} + {} tokens, but its header says {} + {}", src_seen, tgt_seen,
            src_tokens, tgt_tokens);
  c.src_tokens_ = int64_t(src_tokens);
  c.tgt_tokens_ = int64_t(tgt_tokens);
  uint64_t expect = 0;
  for (uint32_t i = 0; i < batch_count; ++i) {
    const unsigned char* e = p + kHeaderBytes + kIndexEntry * block_count + kBatchEntry * i;
    const BatchRange r{get<uint32_t>(e), get<uint32_t>(e + 4)};
    if (r.first != expect)
      corrupt(path, "batch {} starts at pair {}, not at pair {} {}", i, r.first, expect,
              i == 0 ? "(the first)" : fmt::format("(where batch {} ends)", i - 1));
    if (r.count == 0) corrupt(path, "batch {} is empty", i);
    if (r.count > pairs - expect)
      corrupt(path, "batch {} runs past the last pair: {} pairs from pair {} of {}", i, r.count,
              r.first, pairs);
    const BatchCost cost = batch_cost(c.lengths_, r);
    if (r.count > 1 && (uint64_t(cost.src) > max_tokens || uint64_t(cost.tgt) > max_tokens))
      corrupt(path, "batch {} holds more than its max tokens of {}", i, max_tokens);
    c.batches_.push_back(r);
    expect += r.count;
  }
  if (expect != pairs) corrupt(path, "its batches cover {} of its {} pairs", expect, pairs);
  c.file_bytes_ = file_bytes;
  return c;
}

std::span<const int32_t> Corpus::src(size_t i) const {
  return {ids_.data() + offsets_.at(i), size_t(lengths_[i].src)};
}
std::span<const int32_t> Corpus::tgt(size_t i) const {
  return {ids_.data() + offsets_.at(i) + lengths_[i].src, size_t(lengths_[i].tgt)};
}

}  // namespace tfm
