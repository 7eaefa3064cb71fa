#include "libcore/data/vocab.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "libcore/base/error.h"
#include "libcore/data/piece_table.h"
#include "libcore/io/atomic_file.h"
#include "libcore/io/checkpoint.h"
#include "libcore/io/crc32.h"
#include "libcore/io/read_file.h"

namespace tfm {

namespace {

// The bundle's container (man/tfm.7, "Vocabulary bundle"): a 32-byte header
// (magic, version, piece count, the two models' sizes), the source model,
// the target model, the pieces as names (u16 length, UTF-8), and the CRC-32
// of every byte before it.
constexpr char kBundleMagic[8] = {'\x89', 'T', 'F', 'M', 'V', 'O', 'C', 'B'};
constexpr uint32_t kBundleVersion = 1;
constexpr size_t kBundleHeader = 32, kBundleCrc = 4, kMaxPiece = 65535;

// FNV-1a, 64 bits: stable across builds and platforms, unlike std::hash.
uint64_t fnv1a(uint64_t h, std::string_view bytes) {
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

// The hash of `n` pieces in id order, each as piece(i).
template <typename Piece>
uint64_t table_hash(size_t n, Piece piece) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) {
    h = fnv1a(h, piece(i));
    h = fnv1a(h, std::string_view("\0", 1));  // separates "ab","c" from "a","bc"
  }
  return h;
}

template <typename T>
void put(std::string& out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

template <typename T>
T get(std::string_view bytes, size_t at) {
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    value |= static_cast<T>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return value;
}

// Piece -> id without a copy of the piece looked up.
struct PieceHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// The parts of a bundle's container; Errors name `origin`.
struct BundleParts {
  std::string source, target;
  std::vector<std::string> pieces;
};

BundleParts parse_bundle(std::string_view bytes, std::string_view origin) {
  const auto corrupt = [&](std::string_view why) {
    fail("{} is a corrupt tfm vocabulary bundle: {}", origin, why);
  };
  const auto truncated = [&](std::string_view why) {
    fail("{} is a truncated tfm vocabulary bundle: {} bytes, {}", origin, bytes.size(), why);
  };
  // The magic (checked by the caller), the version, then the rest.
  if (bytes.size() < 12) truncated("not even its version");
  const uint32_t version = get<uint32_t>(bytes, 8);
  TFM_REQUIRE(version == kBundleVersion,
              "{} is a tfm vocabulary bundle of format version {}; this tfm reads version {}", origin,
              version, kBundleVersion);
  if (bytes.size() < kBundleHeader + kBundleCrc) truncated("fewer than its header and checksum");
  const uint32_t count = get<uint32_t>(bytes, 12);
  const uint64_t source = get<uint64_t>(bytes, 16), target = get<uint64_t>(bytes, 24);
  // Each piece takes at least 3 bytes; bounded before anything is allocated.
  const uint64_t room = bytes.size() - kBundleHeader - kBundleCrc;
  if (source > room || target > room - source || uint64_t(count) * 3 > room - source - target)
    truncated("fewer than its header says");
  const size_t body = bytes.size() - kBundleCrc;
  if (io::crc32(0, bytes.data(), body) != get<uint32_t>(bytes, body)) corrupt("it fails its checksum");
  BundleParts parts;
  size_t at = kBundleHeader;
  parts.source = std::string(bytes.substr(at, source));
  at += source;
  parts.target = std::string(bytes.substr(at, target));
  at += target;
  parts.pieces.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const size_t n = body - at >= 2 ? get<uint16_t>(bytes, at) : 0;
    if (n == 0 || body - at - 2 < n) corrupt(fmt::format("piece {} of {} is empty or runs past the table", i, count));
    parts.pieces.emplace_back(bytes.substr(at + 2, n));
    at += 2 + n;
  }
  if (at != body) corrupt(fmt::format("{} bytes after its piece table", body - at));
  return parts;
}

std::string bundle_bytes(const BundleParts& p) {
  std::string out(kBundleMagic, sizeof kBundleMagic);
  put<uint32_t>(out, kBundleVersion);
  put<uint32_t>(out, static_cast<uint32_t>(p.pieces.size()));
  put<uint64_t>(out, p.source.size());
  put<uint64_t>(out, p.target.size());
  out += p.source;
  out += p.target;
  for (const std::string& piece : p.pieces) {
    put<uint16_t>(out, static_cast<uint16_t>(piece.size()));
    out += piece;
  }
  put<uint32_t>(out, io::crc32(0, out.data(), out.size()));
  return out;
}

}  // namespace

struct Vocab::Impl {
  std::string bytes;
  std::string origin;
  sentencepiece::SentencePieceProcessor source;
  // A bundle only: the target model (when its bytes differ from the
  // source's) and the piece table.
  sentencepiece::SentencePieceProcessor target_own;
  const sentencepiece::SentencePieceProcessor* target = &source;
  bool bundle = false;
  std::vector<std::string> pieces;
  std::unordered_map<std::string, int32_t, PieceHash, std::equal_to<>> ids;
  int32_t unk = kUnkId;
  std::string fingerprint;

  const sentencepiece::SentencePieceProcessor& model(Side side) const {
    return side == Side::source ? source : *target;
  }
  int32_t size() const { return bundle ? static_cast<int32_t>(pieces.size()) : source.GetPieceSize(); }
  void check_id(int32_t id) const {
    if (id < 0 || id >= size()) fail("id {} is out of range for a vocabulary of {} pieces", id, size());
  }
};

Vocab::Vocab(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Vocab::Vocab(Vocab&&) noexcept = default;
Vocab& Vocab::operator=(Vocab&&) noexcept = default;
Vocab::~Vocab() = default;

Vocab Vocab::load(const std::string& path) {
  if (io::is_checkpoint(path)) {
    std::string tokenizer = io::read_checkpoint_tokenizer(path);
    if (tokenizer.empty()) fail("{} is a tfm checkpoint without a tokenizer", path);
    return from_bytes(std::move(tokenizer), path);
  }
  return from_bytes(io::read_file(path), path);
}

Vocab Vocab::from_bytes(std::string bytes, std::string_view origin) {
  const size_t magic = std::min(bytes.size(), sizeof kBundleMagic);
  if (magic > 0 && std::memcmp(bytes.data(), kBundleMagic, magic) == 0) {
    BundleParts p = parse_bundle(bytes, origin);
    Vocab v = from_parts(std::move(p.source), std::move(p.target), std::move(p.pieces), origin);
    v.impl_->bytes = std::move(bytes);  // as given (the same bytes, parsed and written back)
    return v;
  }
  auto impl = std::make_unique<Impl>();
  impl->bytes = std::move(bytes);
  impl->origin = std::string(origin);
  if (impl->bytes.empty()) fail("{} is empty, not a SentencePiece model", origin);
  const auto status = impl->source.LoadFromSerializedProto(impl->bytes);
  if (!status.ok() || impl->source.GetPieceSize() <= 0)
    fail("{} is not a SentencePiece model, a tfm vocabulary bundle or a tfm checkpoint", origin);
  return Vocab(std::move(impl));
}

Vocab Vocab::from_parts(std::string source_spm, std::string target_spm, std::vector<std::string> pieces,
                        std::string_view origin) {
  auto impl = std::make_unique<Impl>();
  impl->origin = std::string(origin);
  impl->bundle = true;
  const auto load = [&](sentencepiece::SentencePieceProcessor& sp, const std::string& bytes, const char* side) {
    if (bytes.empty() || !sp.LoadFromSerializedProto(bytes).ok() || sp.GetPieceSize() <= 0)
      fail("{}: the {} model of the vocabulary bundle is not a SentencePiece model ({} bytes)", origin, side,
           bytes.size());
  };
  load(impl->source, source_spm, "source");
  if (target_spm != source_spm) {
    load(impl->target_own, target_spm, "target");
    impl->target = &impl->target_own;
  }
  TFM_REQUIRE(pieces.size() < size_t(INT32_MAX), "{}: a piece table of {} pieces is too large", origin,
              pieces.size());
  impl->ids.reserve(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::string& piece = pieces[i];
    TFM_REQUIRE(!piece.empty() && piece.size() <= kMaxPiece,
                "{}: piece {} of the vocabulary bundle is {} bytes long (1 to {} allowed)", origin, i,
                piece.size(), kMaxPiece);
    TFM_REQUIRE(valid_utf8(piece), "{}: piece {} of the vocabulary bundle ('{}') is not UTF-8", origin, i,
                printable(piece));
    const auto [it, added] = impl->ids.emplace(piece, static_cast<int32_t>(i));
    TFM_REQUIRE(added, "{}: the vocabulary bundle has the piece '{}' twice, at ids {} and {}", origin,
                printable(piece), it->second, i);
  }
  const auto unk = impl->ids.find(std::string_view("<unk>"));
  TFM_REQUIRE(unk != impl->ids.end(),
              "{}: the vocabulary bundle's piece table has no '<unk>', which unknown pieces map to", origin);
  impl->unk = unk->second;
  BundleParts parts{std::move(source_spm), std::move(target_spm), std::move(pieces)};
  impl->bytes = bundle_bytes(parts);
  impl->pieces = std::move(parts.pieces);
  // The fingerprint: the table as a plain one's (the ids are the positions),
  // then each model after its size, so that no bytes move from one model to
  // the other unseen.
  const auto piece = [&](size_t i) -> std::string_view { return impl->pieces[i]; };
  uint64_t h = table_hash(impl->pieces.size(), piece);
  for (const std::string* model : {&parts.source, &parts.target}) {
    std::string size;
    put<uint64_t>(size, model->size());
    h = fnv1a(fnv1a(h, size), *model);
  }
  impl->fingerprint = fmt::format("vocab-{:016x}", h);
  return Vocab(std::move(impl));
}

void Vocab::save(const std::string& path) const { io::write_file_atomic(path, impl_->bytes); }

bool Vocab::is_bundle() const { return impl_->bundle; }

int64_t Vocab::size() const { return impl_->size(); }

const std::string& Vocab::bytes() const { return impl_->bytes; }

std::string Vocab::fingerprint() const {
  if (impl_->bundle) return impl_->fingerprint;
  const auto& sp = impl_->source;
  const auto piece = [&](size_t i) -> std::string_view { return sp.IdToPiece(static_cast<int>(i)); };
  return fmt::format("spm-{:016x}", table_hash(static_cast<size_t>(sp.GetPieceSize()), piece));
}

int32_t Vocab::id(std::string_view piece) const {
  if (!impl_->bundle) return impl_->source.PieceToId(piece);
  const auto it = impl_->ids.find(piece);
  return it == impl_->ids.end() ? impl_->unk : it->second;
}

int32_t Vocab::unk_id() const { return impl_->bundle ? impl_->unk : impl_->source.unk_id(); }

std::string_view Vocab::piece(int32_t id) const {
  impl_->check_id(id);
  if (impl_->bundle) return impl_->pieces[static_cast<size_t>(id)];
  return impl_->source.IdToPiece(id);
}

std::vector<std::string> Vocab::encode_pieces(std::string_view text, Side side) const {
  std::vector<std::string> pieces;
  const auto status = impl_->model(side).Encode(text, &pieces);
  if (!status.ok()) fail("cannot encode text: {}", status.ToString());
  return pieces;
}

std::vector<int32_t> Vocab::encode_ids(std::string_view text, Side side) const {
  if (impl_->bundle) {
    std::vector<int32_t> ids;
    for (const std::string& p : encode_pieces(text, side)) ids.push_back(id(p));
    return ids;
  }
  std::vector<int> ids;
  const auto status = impl_->source.Encode(text, &ids);
  if (!status.ok()) fail("cannot encode text: {}", status.ToString());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string Vocab::decode_pieces(const std::vector<std::string>& pieces, Side side) const {
  std::string text;
  const auto status = impl_->model(side).Decode(pieces, &text);
  if (!status.ok()) fail("cannot decode pieces: {}", status.ToString());
  return text;
}

std::string Vocab::decode_ids(const std::vector<int32_t>& ids, Side side) const {
  for (const int32_t id : ids) impl_->check_id(id);
  if (impl_->bundle) {
    std::vector<std::string> pieces;
    pieces.reserve(ids.size());
    for (const int32_t id : ids) pieces.emplace_back(piece(id));
    return decode_pieces(pieces, side);
  }
  std::string text;
  const auto status = impl_->source.Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!status.ok()) fail("cannot decode ids: {}", status.ToString());
  return text;
}

}  // namespace tfm
