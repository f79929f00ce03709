// GgufSpmTokenizer (see gguf_spm_tokenizer.h).
#include "tokenizer/gguf_spm_tokenizer.h"

#include "tokenizer/bpe_merge.h"
#include "tokenizer/end_of_generation.h"
#include "tokenizer/piece_index.h"

namespace gb {
namespace {

}  // namespace

Result<std::shared_ptr<const GgufSpmTokenizer>> GgufSpmTokenizer::create(Vocabulary vocabulary,
                                                                         const std::string& source_name) {
  const size_t n = vocabulary.tokens.size();
  if (vocabulary.model != "llama")
    return make_error(source_name + ": tokenizer.ggml.model '" + vocabulary.model +
                      "' is not supported (only 'llama', SentencePiece BPE)");
  if (n == 0) return make_error(source_name + ": tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(INT32_MAX)) return make_error(source_name + ": too many tokens");
  if (!vocabulary.scores.empty() && vocabulary.scores.size() != n)
    return make_error(source_name + ": tokenizer.ggml.scores has " + std::to_string(vocabulary.scores.size()) +
                      " entries for " + std::to_string(n) + " tokens");
  if (!vocabulary.token_types.empty() && vocabulary.token_types.size() != n)
    return make_error(source_name + ": tokenizer.ggml.token_type has " +
                      std::to_string(vocabulary.token_types.size()) + " entries for " + std::to_string(n) + " tokens");
  for (const auto& [name, id] : {std::pair{"bos", vocabulary.bos_id}, std::pair{"eos", vocabulary.eos_id},
                                 std::pair{"unknown", vocabulary.unk_id}, std::pair{"padding", vocabulary.pad_id}})
    if (id != -1 && !valid_token_id(id, n))
      return make_error(source_name + ": " + name + " token id " + std::to_string(id) + " is outside the vocabulary of " +
                        std::to_string(n));
  // Without token types, treat <0xAB> pieces as bytes and the special ids as
  // control, everything else as normal (what SentencePiece would have written).
  if (vocabulary.token_types.empty()) {
    vocabulary.token_types.assign(n, static_cast<int32_t>(SpmTokenType::Normal));
    for (size_t id = 0; id < n; ++id)
      if (parse_byte_piece(vocabulary.tokens[id]) >= 0) vocabulary.token_types[id] = static_cast<int32_t>(SpmTokenType::Byte);
    for (const int32_t id : {vocabulary.bos_id, vocabulary.eos_id, vocabulary.pad_id})
      if (id >= 0) vocabulary.token_types[static_cast<size_t>(id)] = static_cast<int32_t>(SpmTokenType::Control);
    if (vocabulary.unk_id >= 0)
      vocabulary.token_types[static_cast<size_t>(vocabulary.unk_id)] = static_cast<int32_t>(SpmTokenType::Unknown);
  }

  std::shared_ptr<GgufSpmTokenizer> t(new GgufSpmTokenizer());
  t->byte_token_.fill(-1);
  t->byte_value_.assign(n, -1);
  for (size_t id = 0; id < n; ++id) {
    const auto type = static_cast<SpmTokenType>(vocabulary.token_types[id]);
    const std::string& piece = vocabulary.tokens[id];
    if (type == SpmTokenType::Normal || type == SpmTokenType::UserDefined || type == SpmTokenType::Unused) {
      t->mergeable_.emplace(piece, static_cast<TokenId>(id));
    } else if (type == SpmTokenType::Byte) {
      const int byte = parse_byte_piece(piece);
      if (byte < 0) return make_error(source_name + ": byte token " + std::to_string(id) + " has piece '" + piece + "'");
      t->byte_value_[id] = static_cast<int16_t>(byte);
      if (t->byte_token_[static_cast<size_t>(byte)] < 0) t->byte_token_[static_cast<size_t>(byte)] = static_cast<TokenId>(id);
    }
  }
  t->end_of_generation_ = end_of_generation_flags(vocabulary);
  t->vocab_ = std::move(vocabulary);
  return std::shared_ptr<const GgufSpmTokenizer>(std::move(t));
}

SpmTokenType GgufSpmTokenizer::token_type(TokenId id) const {
  GB_CHECK(valid_token_id(id, vocab_.tokens.size()));
  return static_cast<SpmTokenType>(vocab_.token_types[static_cast<size_t>(id)]);
}

bool GgufSpmTokenizer::is_control(TokenId id) const {
  const SpmTokenType type = token_type(id);
  return type == SpmTokenType::Control || type == SpmTokenType::Unknown;
}

bool GgufSpmTokenizer::is_byte(TokenId id) const { return token_type(id) == SpmTokenType::Byte; }

bool GgufSpmTokenizer::is_end_of_generation(TokenId id) const {
  return valid_token_id(id, end_of_generation_.size()) && end_of_generation_[static_cast<size_t>(id)];
}

SpecialKind GgufSpmTokenizer::special_kind(TokenId id) const {
  const SpmTokenType type = token_type(id);
  if (type == SpmTokenType::Control || type == SpmTokenType::Unknown) return SpecialKind::Control;
  return type == SpmTokenType::UserDefined ? SpecialKind::UserDefined : SpecialKind::None;
}

void GgufSpmTokenizer::encode_fragment(std::string_view text, bool at_boundary, std::vector<TokenId>& ids) const {
  if (text.empty()) return;
  std::string normalized;  // U+2581 for every space, plus the dummy prefix
  normalized.reserve(text.size() + 3);
  if (vocab_.add_space_prefix && at_boundary) normalized.append(kSpaceMark);
  for (const char c : text) {
    if (c == ' ') normalized.append(kSpaceMark);
    else normalized.push_back(c);
  }
  const BpeMergeResult merged = bpe_merge(normalized, mergeable_, vocab_.scores);
  for (const BpeSegment& seg : merged.segments)
    append_segment_ids(std::string_view(normalized).substr(seg.offset, seg.length), merged, ids);
}

// Appends the ids of one final segment: its piece, or (for an unused piece) the
// ids of the two halves it was merged from, or its bytes.
void GgufSpmTokenizer::append_segment_ids(std::string_view piece, const BpeMergeResult& merged, std::vector<TokenId>& ids) const {
  const TokenId id = find_piece(mergeable_, piece);
  if (id >= 0 && token_type(id) != SpmTokenType::Unused) {
    ids.push_back(id);
    return;
  }
  if (id >= 0) {
    const auto split = merged.left_length.find(piece);
    if (split != merged.left_length.end()) {
      append_segment_ids(piece.substr(0, split->second), merged, ids);
      append_segment_ids(piece.substr(split->second), merged, ids);
      return;
    }
    // A single unused character: SentencePiece emits it as is.
    ids.push_back(id);
    return;
  }
  for (const char c : piece) {
    const TokenId byte_id = byte_token_[static_cast<uint8_t>(c)];
    if (byte_id >= 0) {
      ids.push_back(byte_id);
    } else if (vocab_.unk_id >= 0) {
      // No byte fallback: the whole segment is one unknown token.
      ids.push_back(vocab_.unk_id);
      return;
    }
  }
}

std::string GgufSpmTokenizer::token_bytes(TokenId id) const {
  const SpmTokenType type = token_type(id);
  if (type == SpmTokenType::Control || type == SpmTokenType::Unknown) return {};
  if (type == SpmTokenType::Byte) return std::string(1, static_cast<char>(byte_value_[static_cast<size_t>(id)]));
  const std::string& piece = vocab_.tokens[static_cast<size_t>(id)];
  std::string out;
  out.reserve(piece.size());
  for (size_t pos = 0; pos < piece.size();) {
    if (piece.compare(pos, kSpaceMark.size(), kSpaceMark) == 0) {
      out.push_back(' ');
      pos += kSpaceMark.size();
    } else {
      out.push_back(piece[pos++]);
    }
  }
  return out;
}

std::string GgufSpmTokenizer::token_piece(TokenId id) const {
  GB_CHECK(valid_token_id(id, vocab_.tokens.size()));
  return vocab_.tokens[static_cast<size_t>(id)];
}

}  // namespace gb
