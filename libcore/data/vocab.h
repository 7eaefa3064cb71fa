// The shared source-target vocabulary: a SentencePiece model (Debian's
// libsentencepiece), read from a .model file or from the tokenizer slot of a
// tfm checkpoint. Reserved ids are fixed for every model tfm trains:
//   0 <pad>, 1 <unk>, 2 <s> (bos), 3 </s> (eos)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tfm {

// The reserved ids of the shared vocabulary (tfm-tok fixes them; the model
// pads, starts and ends sentences with them).
inline constexpr int32_t kPadId = 0, kUnkId = 1, kBosId = 2, kEosId = 3;

class Vocab {
 public:
  // Loads `path`: a SentencePiece model, or a tfm checkpoint that embeds
  // one. Throws Error naming the file when it is neither.
  static Vocab load(const std::string& path);
  // From the serialized bytes of a SentencePiece model.
  static Vocab from_bytes(std::string bytes, std::string_view origin);

  Vocab(Vocab&&) noexcept;
  Vocab& operator=(Vocab&&) noexcept;
  ~Vocab();

  int64_t size() const;
  // The serialized model (what a checkpoint embeds).
  const std::string& bytes() const;
  // A stable hash of the pieces and their ids: "spm-1a2b3c4d5e6f7a8b".
  // Two models with the same pieces in the same order share it.
  std::string fingerprint() const;

  // Piece <-> id; an unknown piece maps to unk_id() (kUnkId in every model
  // tfm trains).
  int32_t id(std::string_view piece) const;
  int32_t unk_id() const;
  std::string_view piece(int32_t id) const;

  // Text -> pieces / ids, and back (byte-identical to spm_encode/spm_decode).
  std::vector<std::string> encode_pieces(std::string_view text) const;
  std::vector<int32_t> encode_ids(std::string_view text) const;
  std::string decode_pieces(const std::vector<std::string>& pieces) const;
  std::string decode_ids(const std::vector<int32_t>& ids) const;

 private:
  struct Impl;
  explicit Vocab(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfm
