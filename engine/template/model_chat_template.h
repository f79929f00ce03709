// The chat template a model file carries: GGUF `tokenizer.chat_template`, read
// from the metadata alone (no tensors are loaded, so any architecture works).
// llama2.c checkpoints carry none. Threads: any.
#pragma once

#include <string>

#include "core/result.h"

namespace gb {

// The template text, or "" when the file has none; an error if the file cannot
// be read.
Result<std::string> read_model_chat_template(const std::string& path);

}  // namespace gb
