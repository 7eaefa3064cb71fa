// The vocabulary of a model, in one of two forms, read from a file or from
// the tokenizer slot of a tfm checkpoint:
//
// - plain: one SentencePiece model (Debian's libsentencepiece) shared by both
//   sides, whose own ids are the model's ids. Reserved ids are fixed for
//   every model tfm trains: 0 <pad>, 1 <unk>, 2 <s> (bos), 3 </s> (eos).
// - bundle (imported models such as OPUS-MT): a source SentencePiece model
//   that segments input text, a target one that joins output pieces into
//   text (possibly the same bytes), and an explicit piece table (id ->
//   piece) whose ids are the model's (man/tfm.7, "Vocabulary bundle"). Its
//   special ids are the model configuration's business, not this class's.
//
// Encoding defaults to the source side and decoding to the target side; a
// Side argument picks the model for either direction. A plain Vocab has the
// same model on both sides.
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

// Which SentencePiece model segments or joins text.
enum class Side { source, target };

class Vocab {
 public:
  // Loads `path`: a SentencePiece model, a bundle (.tfmvocab), or a tfm
  // checkpoint that embeds either. Throws Error naming the file when it is
  // none of these.
  static Vocab load(const std::string& path);
  // From the serialized bytes of a SentencePiece model or of a bundle.
  static Vocab from_bytes(std::string bytes, std::string_view origin);
  // A bundle: two serialized SentencePiece models and the piece of each id
  // (unique, "<unk>" among them, UTF-8, 1 to 65535 bytes each). Errors name
  // `origin`, and the side or the piece and its ids at fault.
  static Vocab from_parts(std::string source_spm, std::string target_spm,
                          std::vector<std::string> pieces, std::string_view origin);

  Vocab(Vocab&&) noexcept;
  Vocab& operator=(Vocab&&) noexcept;
  ~Vocab();

  // Writes bytes() to `path` atomically.
  void save(const std::string& path) const;

  bool is_bundle() const;
  int64_t size() const;
  // The serialized vocabulary (what a checkpoint embeds): the SentencePiece
  // model, or the bundle's container.
  const std::string& bytes() const;
  // A stable hash of the pieces and their ids: "spm-1a2b3c4d5e6f7a8b".
  // Two models with the same pieces in the same order share it. A bundle's
  // ("vocab-...") covers its table and both models' bytes.
  std::string fingerprint() const;

  // Piece <-> id; an unknown piece maps to unk_id() (kUnkId in every model
  // tfm trains; the table's "<unk>" in a bundle).
  int32_t id(std::string_view piece) const;
  int32_t unk_id() const;
  std::string_view piece(int32_t id) const;

  // Text -> pieces / ids, and back (byte-identical to spm_encode/spm_decode
  // with the side's model). A bundle maps pieces to ids through its table:
  // a piece the table lacks is unk_id(); a piece the target model lacks
  // decodes as SentencePiece decodes an unknown piece.
  std::vector<std::string> encode_pieces(std::string_view text, Side side = Side::source) const;
  std::vector<int32_t> encode_ids(std::string_view text, Side side = Side::source) const;
  std::string decode_pieces(const std::vector<std::string>& pieces, Side side = Side::target) const;
  std::string decode_ids(const std::vector<int32_t>& ids, Side side = Side::target) const;

 private:
  struct Impl;
  explicit Vocab(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfm
