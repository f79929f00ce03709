// GgufBpeTokenizer: the byte-level BPE vocabularies that GGUF files embed
// (tokenizer.ggml.model = "gpt2": GPT-2, Llama 3, Qwen2, Mistral Tekken,
// DeepSeek, StarCoder ...). Immutable after create(); any thread may call the
// const methods.
//
// Encoding one plain-text fragment (special tokens are cut out before, see
// tokenizer.h):
//  1. the pre-tokenizer named by tokenizer.ggml.pre splits it into words;
//  2. each word's bytes are mapped to printable characters (GPT-2's
//     bytes_to_unicode: byte b stays U+00b when printable, else becomes U+0100+n);
//  3. with ignore_merges (Llama 3, Tekken), a word that is a token is emitted as is;
//  4. otherwise BPE starts from one symbol per mapped character and repeatedly
//     merges the adjacent *pair* with the lowest rank in tokenizer.ggml.merges
//     (leftmost on ties); each final symbol is a token (a symbol that is not, which
//     only a damaged vocabulary can produce, falls back to its single characters).
// Decoding maps characters back to bytes; control tokens decode to nothing and
// user-defined tokens to their text as stored.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/result.h"
#include "model/model.h"
#include "tokenizer/piece_index.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace gb {

// tokenizer.ggml.token_type values (same numbering as SentencePiece's).
enum class BpeTokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

class GgufBpeTokenizer final : public Tokenizer {
 public:
  // Fails (naming `source_name`) unless the vocabulary is a "gpt2" one whose
  // merges are present and each two known tokens separated by one space, with
  // consistent array lengths. An unknown tokenizer.ggml.pre is not an error: the
  // default pre-tokenizer is used and `warning` (if given) says so.
  static Result<std::shared_ptr<const GgufBpeTokenizer>> create(Vocabulary vocabulary, const std::string& source_name,
                                                               std::string* warning = nullptr);

  std::string token_bytes(TokenId id) const override;
  std::string token_piece(TokenId id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(vocab_.tokens.size()); }
  TokenId bos_id() const override { return vocab_.bos_id; }
  TokenId eos_id() const override { return vocab_.eos_id; }
  bool is_control(TokenId id) const override;
  bool is_byte(TokenId id) const override { return token_type(id) == BpeTokenType::Byte; }
  std::string_view kind() const override { return "gguf-bpe"; }
  std::string_view pre_tokenizer() const override { return pre_->name(); }
  bool strips_dummy_prefix() const override { return false; }
  bool is_end_of_generation(TokenId id) const override;
  SpecialKind special_kind(TokenId id) const override;

  BpeTokenType token_type(TokenId id) const;
  const Vocabulary& vocabulary() const { return vocab_; }

 protected:
  void encode_fragment(std::string_view text, bool at_boundary, std::vector<TokenId>& out) const override;
  bool default_add_bos() const override { return vocab_.add_bos; }
  bool default_add_eos() const override { return vocab_.add_eos; }

 private:
  GgufBpeTokenizer() = default;
  Status build_merge_ranks(const std::string& source_name);
  void encode_word(std::string_view mapped, std::vector<TokenId>& out) const;

  Vocabulary vocab_;
  std::unique_ptr<const PreTokenizer> pre_;
  PieceIndex token_index_;                         // piece text -> id, every token (first id wins)
  std::unordered_map<uint64_t, int32_t> rank_;     // (left id << 32 | right id) -> merge rank
  std::array<std::string, 256> byte_to_char_;      // byte -> its mapped character (UTF-8)
  std::unordered_map<uint32_t, uint8_t> char_to_byte_;  // mapped code point -> byte
  std::vector<bool> end_of_generation_;            // (vocab_size)
};

}  // namespace gb
