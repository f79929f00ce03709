// Llama2cTokenizer: the tokenizer.bin format of llama2.c, encoding as its run.c
// does. Immutable after load; any thread may call the const methods.
//
// File layout (little-endian, no header beyond the first field):
//   uint32 max_token_len
//   per token, in id order: float32 score, uint32 num_bytes, num_bytes of piece
// The vocabulary size is not stored: the tokens run to the end of the file.
// Pieces hold literal spaces (the exporter turned U+2581 into ' '), byte tokens
// are the text "<0xAB>", and ids 0/1/2 are <unk>, BOS "\n<s>\n", EOS "\n</s>\n".
//
// Encoding (run.c): optional BOS; a non-empty text gets the piece " " first (the
// dummy prefix); each UTF-8 character that is a piece starts as one symbol, any
// other character becomes its byte tokens (id of "<0xAB>", which is 3 + byte in
// every llama2.c vocabulary); then the highest-score mergeable pair is merged
// until none is left (see bpe_merge.h). Whitespace is never collapsed.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "tokenizer/piece_index.h"
#include "tokenizer/tokenizer.h"

namespace gb {

class Llama2cTokenizer final : public Tokenizer {
 public:
  static Result<std::shared_ptr<const Llama2cTokenizer>> load(const std::string& path);
  // Builds from pieces and scores in memory (tests, converters). Ids 0..2 are the
  // control tokens as in every llama2.c vocabulary.
  static Result<std::shared_ptr<const Llama2cTokenizer>> from_pieces(std::vector<std::string> pieces,
                                                                      std::vector<float> scores,
                                                                      std::string source_name);

  std::string token_bytes(TokenId id) const override;
  std::string token_piece(TokenId id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  TokenId bos_id() const override { return 1; }
  TokenId eos_id() const override { return 2; }
  bool is_control(TokenId id) const override { return id >= 0 && id <= 2; }
  bool is_byte(TokenId id) const override;
  std::string_view kind() const override { return "llama2c"; }

 protected:
  void encode_fragment(std::string_view text, bool at_boundary, std::vector<TokenId>& out) const override;

 public:

  float score(TokenId id) const { return scores_.at(static_cast<size_t>(id)); }
  uint32_t max_token_length() const { return max_token_length_; }

 private:
  Llama2cTokenizer() = default;

  std::vector<std::string> pieces_;  // (vocab_size) as stored
  std::vector<float> scores_;        // (vocab_size)
  std::vector<int16_t> byte_value_;  // (vocab_size) the byte of a <0xAB> token, else -1
  PieceIndex index_;                 // every piece -> lowest id holding it (run.c looks up all)
  std::array<TokenId, 256> byte_token_{};  // byte -> id of its <0xAB> token
  uint32_t max_token_length_ = 0;
};

}  // namespace gb
