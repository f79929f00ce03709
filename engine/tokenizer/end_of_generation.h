// Which tokens end generation, from a GGUF vocabulary: the eos, eot and eom ids
// the file names, plus control tokens whose text is a known end-of-turn marker
// (many files name only eos, e.g. Llama 3 base files whose chats end with
// <|eot_id|>). Pure function; any thread.
#pragma once

#include <string_view>
#include <vector>

#include "model/model.h"

namespace gb {

// Whether `id` indexes a table of num_tokens entries.
inline bool valid_token_id(int32_t id, size_t num_tokens) { return id >= 0 && static_cast<size_t>(id) < num_tokens; }

// Texts of end-of-turn / end-of-message tokens across the chat formats we know.
inline constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>",   "<|eom_id|>",       "<|im_end|>",  "<|end|>",       "<end_of_turn>",
    "<|endoftext|>", "<|end_of_text|>", "<EOT>",       "</s>",          "<|return|>",
    "<|call|>",     "<|END_OF_TURN_TOKEN|>",
};

// (num_tokens) true for each end-of-generation token. Token type 3 is control.
inline std::vector<bool> end_of_generation_flags(const Vocabulary& v) {
  std::vector<bool> flags(v.tokens.size(), false);
  for (const int32_t id : {v.eos_id, v.eot_id, v.eom_id})
    if (id >= 0 && static_cast<size_t>(id) < flags.size()) flags[static_cast<size_t>(id)] = true;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const bool control = !v.token_types.empty() && v.token_types[id] == 3;
    if (!control) continue;
    for (const std::string_view text : kEndOfTurnTexts)
      if (v.tokens[id] == text) flags[id] = true;
  }
  return flags;
}

}  // namespace gb
