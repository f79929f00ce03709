// GgufSpmTokenizer: the SentencePiece BPE vocabulary that GGUF files embed
// (tokenizer.ggml.model = "llama"), encoding as SentencePiece does. Immutable
// after construction; any thread may call the const methods.
//
// Encoding: optional BOS; the text with every ' ' replaced by U+2581 and, when
// add_space_prefix is set and the text is non-empty, one U+2581 in front
// (whitespace runs are kept, nothing is collapsed); BPE over UTF-8 characters by
// highest score, leftmost on ties (bpe_merge.h), where a merge may produce a
// normal, user-defined or unused piece but never a control, unknown or byte piece;
// a final piece of type "unused" is split back into the halves it was merged
// from (SentencePiece's resegmentation); a final string that is no piece falls
// back to its bytes <0xAB> (looked up by piece text), or to UNK when the
// vocabulary has no byte tokens.
// User-defined pieces are matched whole before merging (Tokenizer::encode).
#pragma once

#include <array>
#include <memory>
#include <string>

#include "core/result.h"
#include "model/model.h"
#include "tokenizer/bpe_merge.h"
#include "tokenizer/piece_index.h"
#include "tokenizer/tokenizer.h"

namespace gb {

// tokenizer.ggml.token_type values.
enum class SpmTokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

class GgufSpmTokenizer final : public Tokenizer {
 public:
  // Fails (naming `source_name`) unless the vocabulary is a "llama" SPM one with
  // consistent array lengths and special ids inside the vocabulary.
  static Result<std::shared_ptr<const GgufSpmTokenizer>> create(Vocabulary vocabulary, const std::string& source_name);

  std::string token_bytes(TokenId id) const override;
  std::string token_piece(TokenId id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(vocab_.tokens.size()); }
  TokenId bos_id() const override { return vocab_.bos_id; }
  TokenId eos_id() const override { return vocab_.eos_id; }
  bool is_control(TokenId id) const override;
  bool is_byte(TokenId id) const override;
  std::string_view kind() const override { return "gguf-spm"; }
  bool strips_dummy_prefix() const override { return vocab_.add_space_prefix; }
  bool is_end_of_generation(TokenId id) const override;
  SpecialKind special_kind(TokenId id) const override;

  SpmTokenType token_type(TokenId id) const;
  const Vocabulary& vocabulary() const { return vocab_; }

 protected:
  void encode_fragment(std::string_view text, bool at_boundary, std::vector<TokenId>& out) const override;
  bool default_add_bos() const override { return vocab_.add_bos; }
  bool default_add_eos() const override { return vocab_.add_eos; }

 private:
  GgufSpmTokenizer() = default;
  void append_segment_ids(std::string_view piece, const BpeMergeResult& merged, std::vector<TokenId>& ids) const;

  Vocabulary vocab_;
  PieceIndex mergeable_;                   // normal, user-defined and unused pieces
  std::array<TokenId, 256> byte_token_{};  // byte -> id of "<0xAB>", -1 if absent
  std::vector<int16_t> byte_value_;        // (vocab_size) byte of a byte token, else -1
  std::vector<bool> end_of_generation_;    // (vocab_size) see end_of_generation.h
};

}  // namespace gb
