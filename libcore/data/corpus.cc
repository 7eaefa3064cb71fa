// .tfmb writer and reader; the byte layout is man/tfm-batch.1, "FILE FORMAT",
// its records encoded and decoded in corpus_format.h:
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

#include "libcore/base/error.h"
#include "libcore/base/progress.h"
#include "libcore/data/corpus_format.h"
#include "libcore/data/pipeline.h"
#include "libcore/io/atomic_file.h"
#include "libcore/io/checkpoint_format.h"
#include "libcore/io/read_file.h"

namespace tfm {

using io::detail::crc32;
using io::detail::get;
using io::detail::put;
using namespace corpus_format;

namespace {

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
        encode_index_entry(index, {file.pos(), b.stored.size(), uint32_t(b.raw.size()), b.pairs,
                                   b.crc_stored, b.crc_raw});
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
  for (const BatchRange& r : batches) encode_batch(index, r);
  Header h;
  h.version = kCorpusVersion;
  h.width = uint32_t(width);
  h.file_bytes = file.pos();
  h.pairs = order.size();
  h.src_tokens = uint64_t(pairs.src_tokens());
  h.tgt_tokens = uint64_t(pairs.tgt_tokens());
  h.vocab_size = uint64_t(meta.vocab_size);
  h.max_tokens = uint64_t(meta.max_tokens);
  h.max_len = uint32_t(meta.max_len);
  h.block_count = block_count;
  h.batch_count = uint32_t(batches.size());
  h.table_crc = crc32(0, index.data(), index.size());
  h.fingerprint = meta.fingerprint;
  std::string out = encode_header(h) + index;
  file.write_at(0, out.data(), out.size());
  const uint64_t bytes = file.pos();
  file.commit();
  return {bytes, packing_stats(sorted, batches)};
}

// ---- reading ----

namespace {

// The header, checked: magic, version, checksum, and fields that fit
// together and the file's size; the fingerprint's padding dropped.
Header read_header(const std::string& path, const unsigned char* p, size_t have) {
  if (have == 0) fail("{} is empty, not a tfm corpus (.tfmb)", path);
  if (std::memcmp(p, kMagic.data(), std::min(have, kMagic.size())) != 0)
    fail("{} is not a tfm corpus (.tfmb)", path);
  if (have < 12) fail("{} is truncated: it ends inside its header", path);
  const uint32_t version = get<uint32_t>(p + 8);
  if (version < kCorpusVersion)
    fail("{} is a tfm corpus of format version {}, which this tfm no longer reads (it reads "
         "version {}): make it again with tfm-batch", path, version, kCorpusVersion);
  if (version > kCorpusVersion)
    fail("{} is a tfm corpus of format version {}, but this tfm reads only version {}", path,
         version, kCorpusVersion);
  if (have < kHeaderBytes) fail("{} is truncated: it ends inside its header", path);
  if (crc32(0, p, kHeaderBytes - 4) != header_crc(p)) corrupt(path, "its header fails its checksum");
  Header h = decode_header(p);
  if (have < h.file_bytes)
    fail("{} is truncated: it has {} bytes, but its header says {}", path, have, h.file_bytes);
  if (have > h.file_bytes) corrupt(path, "it has {} bytes, but its header says {}", have, h.file_bytes);
  if (h.vocab_size < 4 || h.vocab_size > INT32_MAX)
    corrupt(path, "its vocabulary size {} is out of range", h.vocab_size);
  if (h.width != uint32_t(id_bytes_for(int64_t(h.vocab_size))))
    corrupt(path, "its ids are {} bytes wide, but a vocabulary of {} takes {}", h.width, h.vocab_size,
            id_bytes_for(int64_t(h.vocab_size)));
  if (h.max_len < 1 || h.max_len > uint32_t(kCorpusMaxLen))
    corrupt(path, "its max length {} is outside 1..{}", h.max_len, kCorpusMaxLen);
  if (h.max_tokens < 1 || h.max_tokens > INT64_MAX)
    corrupt(path, "its max tokens {} is out of range", h.max_tokens);
  if (h.pairs >= UINT32_MAX || h.block_count != (h.pairs + kBlockPairs - 1) / kBlockPairs ||
      h.batch_count > h.pairs)
    corrupt(path, "its counts of pairs ({}), blocks ({}) and batches ({}) do not fit together",
            h.pairs, h.block_count, h.batch_count);
  const size_t fp_len = strnlen(h.fingerprint.data(), kFingerprintBytes);
  if (fp_len == kFingerprintBytes ||
      std::any_of(h.fingerprint.begin() + std::ptrdiff_t(fp_len), h.fingerprint.end(), [](char ch) { return ch; }))
    corrupt(path, "its vocabulary fingerprint is not a NUL-padded string");
  h.fingerprint.resize(fp_len);
  const uint64_t table_bytes = kIndexEntry * uint64_t{h.block_count} + kBatchEntry * uint64_t{h.batch_count};
  if (table_bytes > h.file_bytes - kHeaderBytes)
    corrupt(path, "its block index and batch table run past its end");
  if (crc32(0, p + kHeaderBytes, size_t(table_bytes)) != h.table_crc)
    corrupt(path, "its block index or batch table fails its checksum");
  return h;
}

// The pairs of every block, checked, in bucket order.
struct Pairs {
  std::vector<PairLength> lengths;
  std::vector<uint64_t> offsets;  // of each pair's source in ids; target follows
  std::vector<int32_t> ids;
};

Pairs read_blocks(const std::string& path, const unsigned char* p, const Header& h) {
  Pairs out;
  out.lengths.reserve(size_t(h.pairs));
  out.offsets.reserve(size_t(h.pairs));
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!dctx) fail("cannot read {}: out of memory for zstd", path);
  const uint64_t width = h.width, max_len = h.max_len;
  uint64_t next = kHeaderBytes + kIndexEntry * uint64_t{h.block_count} + kBatchEntry * uint64_t{h.batch_count};
  uint64_t seen = 0, src_seen = 0, tgt_seen = 0;
  std::string raw;
  for (uint32_t b = 0; b < h.block_count; ++b) {
    const IndexEntry e = decode_index_entry(p + kHeaderBytes + kIndexEntry * b);
    const uint32_t n = e.pairs;
    if (e.offset != next || e.stored > h.file_bytes - next)
      corrupt(path, "block {} does not lie right after the one before it", b);
    next += e.stored;
    const uint32_t want_n = b + 1 < h.block_count ? kBlockPairs : uint32_t(h.pairs - seen);
    if (n != want_n) corrupt(path, "block {} holds {} pairs instead of {}", b, n, want_n);
    if (e.raw_bytes > uint64_t{n} * (4 + 2 * width * max_len) || e.raw_bytes / kZstdMaxRatio > e.stored)
      corrupt(path, "block {} claims {} bytes, more than it can hold", b, e.raw_bytes);
    if (crc32(0, p + e.offset, size_t(e.stored)) != e.crc_stored) corrupt(path, "block {} fails its checksum", b);
    raw.assign(e.raw_bytes, '\0');
    const size_t got = ZSTD_decompressDCtx(dctx.get(), raw.data(), raw.size(), p + e.offset, size_t(e.stored));
    if (ZSTD_isError(got))
      corrupt(path, "block {} cannot be decompressed (zstd: {})", b, ZSTD_getErrorName(got));
    if (got != e.raw_bytes)
      corrupt(path, "block {} does not decompress to the {} bytes its index says", b, e.raw_bytes);
    if (crc32(0, raw.data(), raw.size()) != e.crc_raw)
      corrupt(path, "block {} fails its checksum after decompression", b);
    const auto* r = reinterpret_cast<const unsigned char*>(raw.data());
    if (e.raw_bytes < uint64_t{n} * 4) corrupt(path, "block {} is too short for its lengths", b);
    uint64_t ids = 0;
    for (uint32_t k = 0; k < n; ++k) {
      const uint32_t s = get<uint16_t>(r + 4 * k), t = get<uint16_t>(r + 4 * k + 2);
      if (s < 1 || s > max_len || t < 1 || t > max_len)
        corrupt(path, "pair {} has lengths {} and {}, outside 1..{}", seen + k, s, t, max_len);
      ids += s + t;
      src_seen += s;
      tgt_seen += t;
    }
    if (e.raw_bytes != uint64_t{n} * 4 + ids * width)
      corrupt(path, "block {} holds {} bytes, but its lengths need {}", b, e.raw_bytes, n * 4 + ids * width);
    const size_t base = out.ids.size();
    out.ids.resize(base + size_t(ids));
    const unsigned char* id_bytes = r + uint64_t{n} * 4;
    for (uint64_t k = 0; k < ids; ++k) {
      const uint32_t id = width == 2 ? get<uint16_t>(id_bytes + 2 * k) : get<uint32_t>(id_bytes + 4 * k);
      if (id >= h.vocab_size)
        corrupt(path, "block {} holds id {}, outside the vocabulary of {}", b, id, h.vocab_size);
      out.ids[base + size_t(k)] = int32_t(id);
    }
    uint64_t off = base;
    for (uint32_t k = 0; k < n; ++k) {
      const PairLength len{int32_t(get<uint16_t>(r + 4 * k)), int32_t(get<uint16_t>(r + 4 * k + 2))};
      if (!out.lengths.empty() && bucket_key(len) < bucket_key(out.lengths.back()))
        corrupt(path, "pair {} is out of bucket order", seen + k);
      out.lengths.push_back(len);
      out.offsets.push_back(off);
      off += uint64_t(len.src + len.tgt);
    }
    seen += n;
  }
  if (next != h.file_bytes) corrupt(path, "its blocks do not reach its end");
  if (src_seen != h.src_tokens || tgt_seen != h.tgt_tokens)
    corrupt(path, "it holds {} + {} tokens, but its header says {} + {}", src_seen, tgt_seen,
            h.src_tokens, h.tgt_tokens);
  return out;
}

// The batch table, checked against the pairs' lengths.
std::vector<BatchRange> read_batches(const std::string& path, const unsigned char* p, const Header& h,
                                     const std::vector<PairLength>& lengths) {
  std::vector<BatchRange> out;
  out.reserve(h.batch_count);
  uint64_t expect = 0;
  for (uint32_t i = 0; i < h.batch_count; ++i) {
    const BatchRange r = decode_batch(p + kHeaderBytes + kIndexEntry * h.block_count + kBatchEntry * i);
    if (r.first != expect)
      corrupt(path, "batch {} starts at pair {}, not at pair {} {}", i, r.first, expect,
              i == 0 ? "(the first)" : fmt::format("(where batch {} ends)", i - 1));
    if (r.count == 0) corrupt(path, "batch {} is empty", i);
    if (r.count > h.pairs - expect)
      corrupt(path, "batch {} runs past the last pair: {} pairs from pair {} of {}", i, r.count,
              r.first, h.pairs);
    const BatchCost cost = batch_cost(lengths, r);
    if (r.count > 1 && (uint64_t(cost.src) > h.max_tokens || uint64_t(cost.tgt) > h.max_tokens))
      corrupt(path, "batch {} holds more than its max tokens of {}", i, h.max_tokens);
    out.push_back(r);
    expect += r.count;
  }
  if (expect != h.pairs) corrupt(path, "its batches cover {} of its {} pairs", expect, h.pairs);
  return out;
}

}  // namespace

Corpus Corpus::read(const std::string& path) {
  const std::string file = io::read_file(path);
  const auto* p = reinterpret_cast<const unsigned char*>(file.data());
  const Header h = read_header(path, p, file.size());
  Pairs pairs = read_blocks(path, p, h);
  Corpus c;
  c.version_ = h.version;
  c.meta_ = CorpusMeta{h.fingerprint, int64_t(h.vocab_size), int32_t(h.max_len), int64_t(h.max_tokens)};
  c.batches_ = read_batches(path, p, h, pairs.lengths);
  c.lengths_ = std::move(pairs.lengths);
  c.offsets_ = std::move(pairs.offsets);
  c.ids_ = std::move(pairs.ids);
  c.src_tokens_ = int64_t(h.src_tokens);
  c.tgt_tokens_ = int64_t(h.tgt_tokens);
  c.file_bytes_ = h.file_bytes;
  return c;
}

std::span<const int32_t> Corpus::src(size_t i) const {
  return {ids_.data() + offsets_.at(i), size_t(lengths_[i].src)};
}
std::span<const int32_t> Corpus::tgt(size_t i) const {
  return {ids_.data() + offsets_.at(i) + lengths_[i].src, size_t(lengths_[i].tgt)};
}

}  // namespace tfm
