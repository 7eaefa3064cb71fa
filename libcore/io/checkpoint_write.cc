// Checkpoint writer; the byte layout is man/tfm.7, "CHECKPOINT FORMAT". In
// short: a 64-byte header, the sections back to back (config, tokenizer,
// tensor_table, tensors, then the optional ones), and a section directory that
// ends the file. Every byte lies under a CRC-32. The reader is
// checkpoint_read.cc; what both share is in checkpoint_format.h.
#include <zstd.h>

#include <algorithm>
#include <array>
#include <memory>
#include <set>

#include "libcore/base/error.h"
#include "libcore/io/atomic_file.h"
#include "libcore/io/checkpoint.h"
#include "libcore/io/checkpoint_format.h"

namespace tfm::io {
using namespace detail;

namespace {

struct ZstdCFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};

// ---- writing ----

// Streams sections into the file, compressing and checksumming as it goes.
class SectionWriter {
 public:
  SectionWriter(AtomicFile& file, const std::string& path, int level)
      : file_(file), path_(path), level_(level), cctx_(ZSTD_createCCtx()),
        out_(ZSTD_CStreamOutSize()) {
    if (!cctx_) fail("cannot write {}: out of memory for zstd", path_);
  }

  void begin(std::string_view name, SectionKind kind, uint16_t codec, uint64_t raw, int threads) {
    cur_ = Section{std::string(name), kind, codec, file_.pos(), 0, raw, 0, 0};
    if (codec != kCodecZstd) return;
    ZSTD_CCtx* c = cctx_.get();
    check(ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters));
    check(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level_));
    check(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1));
    check(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 1));
    // Worker threads are an optimization: a libzstd built without them says no.
    if (threads > 1) ZSTD_CCtx_setParameter(c, ZSTD_c_nbWorkers, threads);
    check(ZSTD_CCtx_setPledgedSrcSize(c, raw));
  }

  void feed(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const size_t k = std::min(n, kChunk);
      cur_.crc_raw = crc32(cur_.crc_raw, p, k);
      if (cur_.codec == kCodecStored) {
        emit(p, k);
      } else {
        ZSTD_inBuffer in{p, k, 0};
        while (in.pos < in.size) compress(in, ZSTD_e_continue);
      }
      p += k;
      n -= k;
    }
  }

  void end() {
    if (cur_.codec == kCodecZstd) {
      ZSTD_inBuffer in{nullptr, 0, 0};
      while (compress(in, ZSTD_e_end) != 0) {
      }
    }
    entries_.push_back(cur_);
  }

  const std::vector<Section>& entries() const { return entries_; }

 private:
  size_t compress(ZSTD_inBuffer& in, ZSTD_EndDirective mode) {
    ZSTD_outBuffer out{out_.data(), out_.size(), 0};
    const size_t left = check(ZSTD_compressStream2(cctx_.get(), &out, &in, mode));
    emit(out_.data(), out.pos);
    return left;
  }
  void emit(const void* p, size_t n) {
    cur_.crc_stored = crc32(cur_.crc_stored, p, n);
    cur_.stored += n;
    file_.write(p, n);
  }
  size_t check(size_t ret) const {
    if (ZSTD_isError(ret)) fail("cannot write {}: zstd: {}", path_, ZSTD_getErrorName(ret));
    return ret;
  }

  AtomicFile& file_;
  const std::string& path_;
  int level_;
  std::unique_ptr<ZSTD_CCtx, ZstdCFree> cctx_;
  std::vector<char> out_;
  Section cur_;
  std::vector<Section> entries_;
};

void check_name(const std::string& path, std::string_view what, std::string_view name,
                std::set<std::string_view>& seen) {
  if (name.empty()) fail("cannot write {}: a {} has an empty name", path, what);
  if (name.size() > kMaxName)
    fail("cannot write {}: the {} name '{}...' is over {} bytes", path, what, name.substr(0, 40),
         kMaxName);
  if (!seen.insert(name).second) fail("cannot write {}: two {}s are named '{}'", path, what, name);
}

}  // namespace

// ---- public API ----

void write_checkpoint(const std::string& path, std::string_view config,
                      std::string_view tokenizer, std::span<const NamedTensor> tensors,
                      std::span<const NamedSection> sections,
                      const CheckpointWriteOptions& options) {
  if (options.zstd_level < 1 || options.zstd_level > ZSTD_maxCLevel())
    fail("cannot write {}: zstd level {} is not in 1..{}", path, options.zstd_level,
         ZSTD_maxCLevel());
  if (options.threads < 1) fail("cannot write {}: {} threads is too few", path, options.threads);

  // The tensor table, with offsets aligned in the decompressed data.
  std::string table;
  put<uint32_t>(table, static_cast<uint32_t>(tensors.size()));
  std::set<std::string_view> names;
  uint64_t data_bytes = 0;
  std::vector<uint64_t> offsets;
  for (const NamedTensor& t : tensors) {
    check_name(path, "tensor", t.name, names);
    const TensorView& v = t.view;
    if (v.device() != Device::cpu())
      fail("cannot write {}: tensor '{}' is on {}; checkpoints are written from host memory", path,
           t.name, v.device().str());
    if (v.data() == nullptr && v.numel() != 0)
      fail("cannot write {}: tensor '{}' ({}) has no data", path, t.name, v.str());
    const uint64_t offset = (data_bytes + kTensorAlign - 1) / kTensorAlign * kTensorAlign;
    put_name(table, t.name);
    put<uint8_t>(table, dtype_code(v.dtype()));
    put<uint8_t>(table, static_cast<uint8_t>(v.rank()));
    for (int64_t d : v.shape()) put<uint64_t>(table, static_cast<uint64_t>(d));
    put<uint64_t>(table, offset);
    put<uint64_t>(table, v.bytes());
    offsets.push_back(offset);
    data_bytes = offset + v.bytes();
  }
  std::set<std::string_view> section_names;
  for (const NamedSection& s : sections) {
    check_name(path, "section", s.name, section_names);
    if (is_reserved(s.name))
      fail("cannot write {}: '{}' is a reserved section name", path, s.name);
  }

  AtomicFile file(path);
  const std::array<char, kHeaderBytes> zeros{};
  file.write(zeros.data(), zeros.size());  // the header, filled in last
  SectionWriter w(file, path, options.zstd_level);
  auto whole = [&](std::string_view name, SectionKind kind, uint16_t codec, std::string_view bytes) {
    w.begin(name, kind, codec, bytes.size(), 1);
    w.feed(bytes.data(), bytes.size());
    w.end();
  };
  // The configuration stays uncompressed: `head -c` shows what model it is.
  whole("config", SectionKind::config, kCodecStored, config);
  whole("tokenizer", SectionKind::tokenizer, kCodecZstd, tokenizer);
  whole("tensor_table", SectionKind::tensor_table, kCodecZstd, table);
  w.begin("tensors", SectionKind::tensors, kCodecZstd, data_bytes, options.threads);
  uint64_t pos = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    w.feed(zeros.data(), static_cast<size_t>(offsets[i] - pos));
    w.feed(tensors[i].view.data(), tensors[i].view.bytes());
    pos = offsets[i] + tensors[i].view.bytes();
  }
  w.end();
  for (const NamedSection& s : sections) {
    if (!s.produce) {
      whole(s.name, SectionKind::extra, kCodecZstd, s.data);
      continue;
    }
    uint64_t fed = 0;
    w.begin(s.name, SectionKind::extra, kCodecZstd, s.bytes, options.threads);
    s.produce([&](std::span<const std::byte> piece) {
      if (piece.size() > s.bytes - fed)
        fail("cannot write {}: section '{}' gets more than the {} bytes it announced", path,
             s.name, s.bytes);
      fed += piece.size();
      w.feed(piece.data(), piece.size());
    });
    if (fed != s.bytes)
      fail("cannot write {}: section '{}' got {} bytes, not the {} it announced", path, s.name,
           fed, s.bytes);
    w.end();
  }

  std::string dir;
  for (const Section& s : w.entries()) {
    put_name(dir, s.name);
    put<uint16_t>(dir, static_cast<uint16_t>(s.kind));
    put<uint16_t>(dir, s.codec);
    put<uint64_t>(dir, s.offset);
    put<uint64_t>(dir, s.stored);
    put<uint64_t>(dir, s.raw);
    put<uint32_t>(dir, s.crc_stored);
    put<uint32_t>(dir, s.crc_raw);
  }
  const uint64_t dir_offset = file.pos();
  file.write(dir.data(), dir.size());

  std::string header(reinterpret_cast<const char*>(kMagic.data()), kMagic.size());
  put<uint32_t>(header, kCheckpointVersion);
  put<uint32_t>(header, 0);
  put<uint64_t>(header, file.pos());
  put<uint64_t>(header, dir_offset);
  put<uint64_t>(header, dir.size());
  put<uint32_t>(header, static_cast<uint32_t>(w.entries().size()));
  put<uint32_t>(header, crc32(0, dir.data(), dir.size()));
  header.resize(60, '\0');
  put<uint32_t>(header, crc32(0, header.data(), 60));
  file.write_at(0, header.data(), header.size());
  file.commit();
}

void write_checkpoint(const std::string& path, const Checkpoint& ckpt,
                      const CheckpointWriteOptions& options) {
  std::vector<NamedTensor> tensors;
  tensors.reserve(ckpt.tensors.size());
  for (const CheckpointTensor& t : ckpt.tensors) {
    const uint64_t need = static_cast<uint64_t>(t.shape.numel()) * dtype_size(t.dtype);
    if (t.data.size() != need)
      fail("cannot write {}: tensor '{}' is {} {}, which takes {} bytes, but it holds {}", path,
           t.name, dtype_name(t.dtype), t.shape.str(), need, t.data.size());
    tensors.push_back({t.name, TensorView(const_cast<std::byte*>(t.data.data()), t.dtype, t.shape)});
  }
  std::vector<NamedSection> sections;
  for (const auto& [name, bytes] : ckpt.sections) sections.push_back({name, bytes});
  write_checkpoint(path, ckpt.config, ckpt.tokenizer, tensors, sections, options);
}

}  // namespace tfm::io
