// SentencePieceTokenizer: a SentencePiece ModelProto (.model file) run through
// libsentencepiece. Immutable after load; any thread may call the const methods
// (SentencePieceProcessor's encode is const and thread-safe).
//
// Whitespace: a .model file may ask its normalizer to collapse runs of spaces and
// trim the ends (normalizer_spec.remove_extra_whitespaces, the SentencePiece
// default; tok512.model has it). llama2.c run.c and llama.cpp never do that, and
// the golden vectors follow run.c, so by default we load the proto with that flag
// turned off: "a  b" then gives the same ids as the llama2.c and GGUF tokenizers.
// SentencePieceOptions::keep_model_normalizer = true loads the file unchanged,
// which matches `spm_encode` on the same file instead.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace gb {

struct SentencePieceOptions {
  bool keep_model_normalizer = false;  // true: honour remove_extra_whitespaces as stored
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  static Result<std::shared_ptr<const SentencePieceTokenizer>> load(const std::string& path,
                                                                    const SentencePieceOptions& options = {});
  ~SentencePieceTokenizer() override;

  std::string token_bytes(TokenId id) const override;
  std::string token_piece(TokenId id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  TokenId bos_id() const override { return bos_id_; }
  TokenId eos_id() const override { return eos_id_; }
  bool is_control(TokenId id) const override;
  bool is_byte(TokenId id) const override;
  std::string_view kind() const override { return "sentencepiece"; }

 protected:
  // libsentencepiece applies its own normalizer, dummy prefix included, to every
  // fragment; `at_boundary` does not change it.
  void encode_fragment(std::string_view text, bool at_boundary, std::vector<TokenId>& out) const override;

 public:

 private:
  SentencePieceTokenizer();

  enum class PieceKind : uint8_t { Text, Control, Byte };
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::vector<std::string> pieces_;  // (vocab_size) cached IdToPiece
  std::vector<std::string> bytes_;   // (vocab_size) cached token_bytes
  std::vector<PieceKind> kinds_;     // (vocab_size)
  TokenId bos_id_ = -1;
  TokenId eos_id_ = -1;
};

// Rewrites a serialized ModelProto so its normalizer keeps whitespace runs
// (normalizer_spec.remove_extra_whitespaces = false) and drops self_test_data,
// whose expectations were made with the original normalizer. Returns an error
// message in `error` (and an empty string) if the bytes are not a valid proto.
std::string sentencepiece_proto_keep_whitespace(std::string_view proto, std::string& error);

}  // namespace gb
