#include "libcore/data/vocab.h"

#include <sentencepiece_processor.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "libcore/base/error.h"
#include "libcore/io/checkpoint.h"
#include "libcore/io/read_file.h"

namespace tfm {

namespace {

// The first bytes of every tfm checkpoint (man/tfm.7, "CHECKPOINT FORMAT").

// FNV-1a, 64 bits: stable across builds and platforms, unlike std::hash.
uint64_t fnv1a(uint64_t h, std::string_view bytes) {
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

struct Vocab::Impl {
  std::string bytes;
  std::string origin;
  sentencepiece::SentencePieceProcessor sp;
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
  auto impl = std::make_unique<Impl>();
  impl->bytes = std::move(bytes);
  impl->origin = std::string(origin);
  if (impl->bytes.empty()) fail("{} is empty, not a SentencePiece model", origin);
  const auto status = impl->sp.LoadFromSerializedProto(impl->bytes);
  if (!status.ok() || impl->sp.GetPieceSize() <= 0)
    fail("{} is not a SentencePiece model or a tfm checkpoint", origin);
  return Vocab(std::move(impl));
}

int64_t Vocab::size() const { return impl_->sp.GetPieceSize(); }

const std::string& Vocab::bytes() const { return impl_->bytes; }

std::string Vocab::fingerprint() const {
  uint64_t h = 0xcbf29ce484222325ULL;
  const int n = impl_->sp.GetPieceSize();
  for (int i = 0; i < n; ++i) {
    h = fnv1a(h, impl_->sp.IdToPiece(i));
    h = fnv1a(h, std::string_view("\0", 1));  // separates "ab","c" from "a","bc"
  }
  return fmt::format("spm-{:016x}", h);
}

int32_t Vocab::id(std::string_view piece) const { return impl_->sp.PieceToId(piece); }

int32_t Vocab::unk_id() const { return impl_->sp.unk_id(); }

std::string_view Vocab::piece(int32_t id) const {
  if (id < 0 || id >= impl_->sp.GetPieceSize())
    fail("id {} is out of range for a vocabulary of {} pieces", id, impl_->sp.GetPieceSize());
  return impl_->sp.IdToPiece(id);
}

std::vector<std::string> Vocab::encode_pieces(std::string_view text) const {
  std::vector<std::string> pieces;
  const auto status = impl_->sp.Encode(text, &pieces);
  if (!status.ok()) fail("cannot encode text: {}", status.ToString());
  return pieces;
}

std::vector<int32_t> Vocab::encode_ids(std::string_view text) const {
  std::vector<int> ids;
  const auto status = impl_->sp.Encode(text, &ids);
  if (!status.ok()) fail("cannot encode text: {}", status.ToString());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string Vocab::decode_pieces(const std::vector<std::string>& pieces) const {
  std::string text;
  const auto status = impl_->sp.Decode(pieces, &text);
  if (!status.ok()) fail("cannot decode pieces: {}", status.ToString());
  return text;
}

std::string Vocab::decode_ids(const std::vector<int32_t>& ids) const {
  const int n = impl_->sp.GetPieceSize();
  for (const int32_t id : ids)
    if (id < 0 || id >= n) fail("id {} is out of range for a vocabulary of {} pieces", id, n);
  std::string text;
  const auto status = impl_->sp.Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!status.ok()) fail("cannot decode ids: {}", status.ToString());
  return text;
}

}  // namespace tfm
