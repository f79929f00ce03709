// A small SentencePiece-style vocabulary built by hand for tests whose expected
// ids are worked out on paper: <unk> 0, <s> 1, </s> 2, byte tokens <0x00>..<0xFF>
// at 3..258 (the llama layout), then the given pieces from id 259 on.
#pragma once

#include <string>
#include <vector>

#include "model/model.h"
#include "tokenizer/gguf_spm_tokenizer.h"

namespace gbtest {

struct HandPiece {
  std::string text;  // use "\xE2\x96\x81" (U+2581) for a space
  float score = 0.0f;
  gb::SpmTokenType type = gb::SpmTokenType::Normal;
};

inline constexpr int kFirstHandPiece = 259;

inline gb::Vocabulary hand_vocabulary(const std::vector<HandPiece>& pieces) {
  gb::Vocabulary v;
  v.model = "llama";
  auto add = [&](std::string text, float score, gb::SpmTokenType type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.token_types.push_back(static_cast<int32_t>(type));
  };
  add("<unk>", 0, gb::SpmTokenType::Unknown);
  add("<s>", 0, gb::SpmTokenType::Control);
  add("</s>", 0, gb::SpmTokenType::Control);
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b)
    add(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0, gb::SpmTokenType::Byte);
  for (const HandPiece& p : pieces) add(p.text, p.score, p.type);
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  return v;
}

}  // namespace gbtest
