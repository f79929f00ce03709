// Uses a tokenizer built from fuzzed bytes the way generation does: encode a
// fixed text (plain and with special tokens), decode the ids, stream-decode
// every id of a small range, and look at each piece. Crashes, sanitizer reports
// and ids outside the vocabulary are the findings. Single thread.
#pragma once

#include <string>
#include <vector>

#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"

namespace gbfuzz {

inline void check_ids_in_range(const gb::Tokenizer& tok, const std::vector<gb::TokenId>& ids) {
  for (const gb::TokenId id : ids)
    if (id < 0 || id >= tok.vocab_size())
      fuzz_fail(std::string(tok.kind()) + " encode gave id " + std::to_string(id) + " outside the vocabulary of " +
                std::to_string(tok.vocab_size()));
}

inline void use_tokenizer(const gb::Tokenizer& tok) {
  static const std::string kText = "Once upon a time, <s> \xC3\xA9t\xC3\xA9 \xE4\xB8\xAD\xF0\x9F\x98\x80\n\t  x<|eot_id|>";
  for (const bool special : {false, true}) {
    gb::EncodeOptions options;
    options.parse_special = special;
    const std::vector<gb::TokenId> ids = tok.encode(kText, options);
    check_ids_in_range(tok, ids);
    (void)tok.decode(ids);
  }
  const int32_t n = tok.vocab_size();
  std::vector<gb::TokenId> range;
  gb::StreamingDecoder stream(tok);
  for (gb::TokenId id = 0; id < n && id < 512; ++id) {
    (void)tok.token_piece(id);
    (void)tok.token_bytes(id);
    (void)stream.push(id);
    range.push_back(id);
  }
  (void)tok.decode(range);
  (void)tok.end_of_generation_ids();
}

}  // namespace gbfuzz
