// StreamingDecoder (see tokenizer.h): turns a token stream into text without ever
// emitting part of a UTF-8 character.
//
// pending_ holds the bytes after the last complete character. After each token
// we emit every complete character from the front of pending_, replace every run
// that can no longer become valid with U+FFFD, and keep a valid-but-truncated
// tail (at most 3 bytes) for the next token. flush() gives that tail up as U+FFFD.
#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

namespace gb {

void StreamingDecoder::prime(std::span<const TokenId> ids) {
  pending_.clear();
  at_start_ = true;
  for (const TokenId id : ids) {
    if (tokenizer_.is_control(id)) {
      if (id == tokenizer_.bos_id()) at_start_ = true;
      continue;
    }
    at_start_ = false;
  }
}

std::string StreamingDecoder::push(TokenId id) {
  if (tokenizer_.is_control(id)) {
    if (id == tokenizer_.bos_id()) at_start_ = true;
    return {};
  }
  std::string bytes = tokenizer_.token_bytes(id);
  if (at_start_ && tokenizer_.strips_dummy_prefix() && !tokenizer_.is_byte(id) && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
  at_start_ = false;
  pending_ += bytes;

  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const Utf8Step step = utf8_next(pending_, pos);
    if (step.kind == Utf8Kind::Incomplete) break;  // may still be completed
    if (step.kind == Utf8Kind::Complete) out.append(pending_, pos, step.num_bytes);
    else out.append(kUtf8Replacement);
    pos += step.num_bytes;
  }
  pending_.erase(0, pos);
  return out;
}

std::string StreamingDecoder::flush() {
  std::string out = utf8_sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace gb
