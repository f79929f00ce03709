// Tokenizer: text <-> token ids for one vocabulary. Implementations: SentencePiece
// .model files (libsentencepiece), llama2.c tokenizer.bin, and the vocabularies
// embedded in GGUF: SentencePiece BPE ("llama") and byte-level BPE ("gpt2"),
// chosen by tokenizer.ggml.model from a table (create_gguf_tokenizer). Immutable
// after load; any thread may call the const methods.
//
// Special tokens: encode() first cuts the text at whole special-token strings
// (longest first at each position), then encodes the plain pieces between them.
// User-defined tokens are always matched whole; control tokens (<|eot_id|>,
// <|im_start|> ...) only with parse_special, so text a user typed cannot inject
// a turn, while text rendered from a chat template can.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "core/result.h"

namespace gb {

struct Model;
struct Vocabulary;

struct EncodeOptions {
  // BOS first (and EOS last) as the vocabulary asks (tokenizer.ggml.add_bos_token,
  // add_eos_token) when unset; true / false forces BOS on / off (no EOS then).
  std::optional<bool> add_bos;
  // Recognise control-token strings ("<|im_start|>") as their ids. Off for user
  // text; on for text rendered from a chat template.
  bool parse_special = false;
};

// How a token takes part in special-token matching.
enum class SpecialKind { None, Control, UserDefined };

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Encodes text (see the file comment for special tokens). A plain-text piece at
  // the start or after a special token gets the SentencePiece dummy-prefix space
  // when the vocabulary asks for it.
  std::vector<TokenId> encode(std::string_view text, const EncodeOptions& options = {}) const;
  // Short form: add_special = BOS/EOS as the vocabulary asks (no BOS for Qwen),
  // false = none; control-token strings stay plain text.
  std::vector<TokenId> encode(std::string_view text, bool add_special) const {
    return add_special ? encode(text, EncodeOptions{}) : encode(text, EncodeOptions{.add_bos = false});
  }

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
  virtual std::string_view kind() const = 0;  // "sentencepiece", "llama2c", "gguf-spm", "gguf-bpe"
  // The pre-tokenizer in use ("" for SentencePiece kinds), for info and traces.
  virtual std::string_view pre_tokenizer() const { return {}; }

  // SentencePiece's dummy prefix is a property of the vocabulary: when true,
  // decoding drops the leading space of the first text piece after BOS (or at
  // the start). Byte-level BPE keeps every space: it is real text there.
  virtual bool strips_dummy_prefix() const { return true; }
  // Whether generation stops at this token: EOS and every other end-of-turn
  // token the vocabulary marks (eot, eom, <|im_end|>, <end_of_turn> ...).
  virtual bool is_end_of_generation(TokenId id) const { return id == eos_id(); }
  // Every end-of-generation id, ascending (for info and the UI).
  std::vector<TokenId> end_of_generation_ids() const;
  virtual SpecialKind special_kind(TokenId id) const { return is_control(id) ? SpecialKind::Control : SpecialKind::None; }

  // Decodes a whole id sequence byte-exactly. When strips_dummy_prefix(), the
  // dummy-prefix space of the first text piece after BOS (or at the start) is
  // removed, as SentencePiece does.
  std::string decode(std::span<const TokenId> ids) const;

 protected:
  // Encodes plain text (no special tokens in it, no BOS). `at_boundary`: the text
  // starts the input or follows a special token (where SentencePiece puts its
  // dummy prefix). Appends to `out`.
  virtual void encode_fragment(std::string_view text, bool at_boundary, std::vector<TokenId>& out) const = 0;
  virtual bool default_add_bos() const { return true; }
  virtual bool default_add_eos() const { return false; }

 private:
  struct SpecialPiece {
    std::string text;
    TokenId id;
    bool control;
  };
  const std::vector<SpecialPiece>& special_pieces() const;  // longest first, built on first use
  mutable std::once_flag specials_once_;
  mutable std::vector<SpecialPiece> specials_;
  mutable std::array<bool, 256> special_first_byte_{};  // some special piece starts with this byte
};

// The tokenizer for a GGUF-embedded vocabulary, chosen by tokenizer.ggml.model
// from a table ("llama" -> SentencePiece BPE, "gpt2" -> byte-level BPE). Errors
// name `source_name` and the problem. `warning` (optional) receives a note such
// as an unknown pre-tokenizer name that fell back to the default.
Result<std::shared_ptr<const Tokenizer>> create_gguf_tokenizer(Vocabulary vocabulary, const std::string& source_name,
                                                               std::string* warning = nullptr);

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
