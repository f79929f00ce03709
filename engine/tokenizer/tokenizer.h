// Tokenizer: text <-> token ids for one vocabulary. Implementations: SentencePiece
// .model files (libsentencepiece), llama2.c tokenizer.bin, and the SPM vocabulary
// embedded in GGUF. Immutable after load; any thread may call the const methods.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "core/result.h"

namespace gb {

struct Model;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Encodes text. With add_bos the BOS id comes first. A non-empty text gets
  // the SentencePiece dummy-prefix space when the vocabulary asks for it.
  virtual std::vector<TokenId> encode(std::string_view text, bool add_bos) const = 0;

  // Raw bytes of one token as it appears in decoded text: U+2581 becomes a space,
  // byte-fallback tokens <0xAB> become the single byte 0xAB, control tokens
  // (BOS/EOS/UNK...) give an empty string.
  virtual std::string token_bytes(TokenId id) const = 0;

  // The piece as stored in the vocabulary (for display: "<0x0A>", "▁the", "<s>").
  virtual std::string token_piece(TokenId id) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual TokenId bos_id() const = 0;
  virtual TokenId eos_id() const = 0;
  virtual bool is_control(TokenId id) const = 0;
  // A byte-fallback token (<0xAB>): token_bytes() is that one raw byte, which may
  // be a fragment of a multi-byte UTF-8 character.
  virtual bool is_byte(TokenId id) const = 0;
  virtual std::string_view kind() const = 0;  // "sentencepiece", "llama2c", "gguf-spm"

  // Decodes a whole id sequence byte-exactly. The dummy-prefix space of the first
  // text piece after BOS (or at the start) is removed, as SentencePiece does.
  std::string decode(std::span<const TokenId> ids) const;
};

// Picks the tokenizer for a model: an explicit path (.model = SentencePiece proto,
// anything else = llama2.c tokenizer.bin) wins; else the GGUF-embedded vocabulary;
// else tok*.bin / tokenizer.bin / tokenizer.model next to the model file. Fails if
// the tokenizer's vocabulary size differs from the model's.
Result<std::shared_ptr<const Tokenizer>> load_tokenizer(const Model& model, const std::string& tokenizer_path);

// Loads a tokenizer file on its own, with no model: a `.model` file is a
// SentencePiece proto, anything else a llama2.c tokenizer.bin.
Result<std::shared_ptr<const Tokenizer>> load_tokenizer_file(const std::string& path);

// Streaming decode for generation: feed ids one at a time, get back only whole
// UTF-8 characters (a character split across byte tokens is held until complete).
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // Tell the decoder what came before (e.g. the prompt) so a leading space is
  // handled as decode() would. Returns nothing; the prompt text is not emitted,
  // and pending bytes are dropped (a prompt ending mid-character is not joined
  // with the continuation).
  void prime(std::span<const TokenId> ids);
  std::string push(TokenId id);  // complete UTF-8 text made available by this token
  std::string flush();           // whatever is pending (invalid bytes as U+FFFD)

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;  // bytes of an unfinished UTF-8 character
  bool at_start_ = true; // no text piece emitted yet: strip the dummy-prefix space
};

}  // namespace gb
