// Reading the tokenizer vocabulary (tokenizer.ggml.*) out of a GGUF file. Works on
// full model files and on tensor-less vocabulary files (ggml-vocab-*.gguf): only
// the header and metadata are parsed. Pure functions; any thread.
//
// Keys: tokenizer.ggml.model, .pre, .tokens (required), .scores and .token_type
// (optional; when present their length must equal the token count), .merges
// (optional array of strings; checked by the byte-level BPE tokenizer),
// .bos/.eos/.eot/.eom/.unknown/.padding_token_id (must name a token;
// 0xFFFFFFFF or -1 mean none and give -1), .add_bos_token,
// .add_eos_token, .add_space_prefix. Absent flags keep Vocabulary's defaults,
// except add_space_prefix, which defaults to true only for model "llama"
// (SentencePiece); byte-level BPE vocabularies have no dummy prefix.
#pragma once

#include <optional>
#include <string>

#include "core/result.h"
#include "model/gguf_file.h"
#include "model/model.h"

namespace gb {

// The vocabulary of a GGUF file; fails if the file is not a valid GGUF or has no
// tokenizer.ggml.tokens, with a message naming the file and the problem.
Result<Vocabulary> read_gguf_vocabulary(const std::string& path);

// The vocabulary of an already parsed file; nullopt when it has no
// tokenizer.ggml.tokens; an error when the tokenizer keys are malformed.
Result<std::optional<Vocabulary>> vocabulary_from_gguf(const GgufFile& file);

}  // namespace gb
