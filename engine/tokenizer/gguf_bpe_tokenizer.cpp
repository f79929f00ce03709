// GgufBpeTokenizer (see gguf_bpe_tokenizer.h).
#include "tokenizer/gguf_bpe_tokenizer.h"

#include "core/utf8.h"
#include "tokenizer/bpe_merge.h"
#include "tokenizer/end_of_generation.h"

namespace gb {
namespace {


std::string utf8_encode(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

// Code point of the valid UTF-8 character of `n` bytes at s[pos].
uint32_t utf8_code_point(std::string_view s, size_t pos, size_t n) {
  const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[pos + k])); };
  if (n == 1) return b(0);
  if (n == 2) return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
  if (n == 3) return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the rest
// (controls, space, DEL, NBSP, soft hyphen ...) to U+0100 upward in byte order.
uint32_t byte_code_point(int byte, int& next_extra) {
  const bool printable = (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || (byte >= 174 && byte <= 255);
  return printable ? static_cast<uint32_t>(byte) : static_cast<uint32_t>(256 + next_extra++);
}

uint64_t pair_key(TokenId left, TokenId right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

Result<std::shared_ptr<const GgufBpeTokenizer>> GgufBpeTokenizer::create(Vocabulary vocabulary,
                                                                         const std::string& source_name,
                                                                         std::string* warning) {
  const size_t n = vocabulary.tokens.size();
  if (vocabulary.model != "gpt2")
    return make_error(source_name + ": tokenizer.ggml.model '" + vocabulary.model + "' is not byte-level BPE ('gpt2')");
  if (n == 0) return make_error(source_name + ": tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(INT32_MAX)) return make_error(source_name + ": too many tokens");
  if (!vocabulary.token_types.empty() && vocabulary.token_types.size() != n)
    return make_error(source_name + ": tokenizer.ggml.token_type has " +
                      std::to_string(vocabulary.token_types.size()) + " entries for " + std::to_string(n) + " tokens");
  for (const auto& [name, id] : {std::pair{"bos", vocabulary.bos_id}, std::pair{"eos", vocabulary.eos_id},
                                 std::pair{"eot", vocabulary.eot_id}, std::pair{"eom", vocabulary.eom_id},
                                 std::pair{"unknown", vocabulary.unk_id}, std::pair{"padding", vocabulary.pad_id}})
    if (id != -1 && !valid_token_id(id, n))
      return make_error(source_name + ": " + name + " token id " + std::to_string(id) + " is outside the vocabulary of " +
                        std::to_string(n));
  if (vocabulary.token_types.empty()) vocabulary.token_types.assign(n, static_cast<int32_t>(BpeTokenType::Normal));

  std::shared_ptr<GgufBpeTokenizer> t(new GgufBpeTokenizer());
  auto pre = PreTokenizer::create(vocabulary.pre);
  if (!pre.ok()) return make_error(source_name + ": " + pre.error().message);
  t->pre_ = std::move(pre).value();
  if (!PreTokenizer::is_known(vocabulary.pre) && warning != nullptr)
    *warning = source_name + ": unknown pre-tokenizer tokenizer.ggml.pre = '" + vocabulary.pre +
               "'; using the default split rules, so encoding may differ from the model's own tokenizer";

  int next_extra = 0;
  for (int byte = 0; byte < 256; ++byte) {
    const uint32_t cp = byte_code_point(byte, next_extra);
    t->byte_to_char_[static_cast<size_t>(byte)] = utf8_encode(cp);
    t->char_to_byte_.emplace(cp, static_cast<uint8_t>(byte));
  }
  t->token_index_.reserve(n);
  for (size_t id = 0; id < n; ++id) t->token_index_.emplace(vocabulary.tokens[id], static_cast<TokenId>(id));
  t->end_of_generation_ = end_of_generation_flags(vocabulary);
  t->vocab_ = std::move(vocabulary);
  GB_TRY(t->build_merge_ranks(source_name));
  return std::shared_ptr<const GgufBpeTokenizer>(std::move(t));
}

// tokenizer.ggml.merges, line k = rank k: "left right", both vocabulary tokens.
Status GgufBpeTokenizer::build_merge_ranks(const std::string& source_name) {
  if (vocab_.merges.empty())
    return make_error(source_name + ": byte-level BPE vocabulary has no merges (tokenizer.ggml.merges is missing or empty)");
  rank_.reserve(vocab_.merges.size());
  for (size_t rank = 0; rank < vocab_.merges.size(); ++rank) {
    const std::string_view merge = vocab_.merges[rank];
    // The left part may itself start with a space in a few vocabularies, so the
    // separator is the first space after the first byte.
    const size_t space = merge.size() < 2 ? std::string_view::npos : merge.find(' ', 1);
    if (space == std::string_view::npos || space + 1 >= merge.size())
      return make_error(source_name + ": tokenizer.ggml.merges entry " + std::to_string(rank) + " '" +
                        std::string(merge) + "' is not two tokens separated by a space");
    const std::string_view left = merge.substr(0, space), right = merge.substr(space + 1);
    const TokenId left_id = find_piece(token_index_, left), right_id = find_piece(token_index_, right);
    if (left_id < 0 || right_id < 0)
      return make_error(source_name + ": tokenizer.ggml.merges entry " + std::to_string(rank) + " '" +
                        std::string(merge) + "' names a token that is not in the vocabulary: '" +
                        std::string(left_id < 0 ? left : right) + "'");
    rank_.emplace(pair_key(left_id, right_id), static_cast<int32_t>(rank));
  }
  return Status::success();
}

BpeTokenType GgufBpeTokenizer::token_type(TokenId id) const {
  GB_CHECK(valid_token_id(id, vocab_.tokens.size()));
  return static_cast<BpeTokenType>(vocab_.token_types[static_cast<size_t>(id)]);
}

bool GgufBpeTokenizer::is_control(TokenId id) const {
  const BpeTokenType type = token_type(id);
  return type == BpeTokenType::Control || type == BpeTokenType::Unknown || type == BpeTokenType::Unused;
}

bool GgufBpeTokenizer::is_end_of_generation(TokenId id) const {
  return valid_token_id(id, end_of_generation_.size()) && end_of_generation_[static_cast<size_t>(id)];
}

SpecialKind GgufBpeTokenizer::special_kind(TokenId id) const {
  const BpeTokenType type = token_type(id);
  if (type == BpeTokenType::Control || type == BpeTokenType::Unknown) return SpecialKind::Control;
  return type == BpeTokenType::UserDefined ? SpecialKind::UserDefined : SpecialKind::None;
}

void GgufBpeTokenizer::encode_fragment(std::string_view text, bool /*at_boundary*/, std::vector<TokenId>& out) const {
  std::string mapped;
  for (const std::string_view word : pre_->split(text)) {
    mapped.clear();
    for (const char c : word) mapped += byte_to_char_[static_cast<uint8_t>(c)];
    encode_word(mapped, out);
  }
}

// BPE over one mapped word (see the header, steps 3-4).
void GgufBpeTokenizer::encode_word(std::string_view mapped, std::vector<TokenId>& out) const {
  if (pre_->ignore_merges() || mapped.size() <= 4) {
    // A word that is one token needs no merging (with ignore_merges this is the
    // rule; otherwise a shortcut for single characters, which cannot merge).
    const TokenId whole = find_piece(token_index_, mapped);
    if (whole >= 0 && (pre_->ignore_merges() || utf8_next(mapped, 0).num_bytes == mapped.size())) {
      out.push_back(whole);
      return;
    }
  }
  const MergeRanker by_pair_rank = [this](std::string_view left, std::string_view right) -> std::optional<float> {
    const TokenId l = find_piece(token_index_, left);
    const TokenId r = find_piece(token_index_, right);
    if (l < 0 || r < 0) return std::nullopt;
    const auto it = rank_.find(pair_key(l, r));
    if (it == rank_.end()) return std::nullopt;
    return -static_cast<float>(it->second);  // ranks < 2^24 are exact in float
  };
  const BpeMergeResult merged = bpe_merge_ranked(mapped, by_pair_rank);
  for (const BpeSegment& seg : merged.segments) {
    const std::string_view piece = mapped.substr(seg.offset, seg.length);
    const TokenId id = find_piece(token_index_, piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Not a token (a damaged vocabulary): its characters one by one, or UNK.
    for (size_t pos = 0; pos < piece.size();) {
      const size_t len = utf8_next(piece, pos).num_bytes;
      const TokenId c = find_piece(token_index_, piece.substr(pos, len));
      if (c >= 0) out.push_back(c);
      else if (vocab_.unk_id >= 0) out.push_back(vocab_.unk_id);
      pos += len;
    }
  }
}

std::string GgufBpeTokenizer::token_bytes(TokenId id) const {
  const BpeTokenType type = token_type(id);
  if (type == BpeTokenType::Control || type == BpeTokenType::Unknown || type == BpeTokenType::Unused) return {};
  const std::string& piece = vocab_.tokens[static_cast<size_t>(id)];
  if (type == BpeTokenType::UserDefined) return piece;
  std::string out;
  out.reserve(piece.size());
  for (size_t pos = 0; pos < piece.size();) {
    const Utf8Step step = utf8_next(piece, pos);
    const auto it = step.kind == Utf8Kind::Complete ? char_to_byte_.find(utf8_code_point(piece, pos, step.num_bytes))
                                                    : char_to_byte_.end();
    if (it != char_to_byte_.end()) out.push_back(static_cast<char>(it->second));
    else out.append(piece, pos, step.num_bytes);  // not a mapped character: the text as stored
    pos += step.num_bytes;
  }
  return out;
}

std::string GgufBpeTokenizer::token_piece(TokenId id) const {
  GB_CHECK(valid_token_id(id, vocab_.tokens.size()));
  return vocab_.tokens[static_cast<size_t>(id)];
}

}  // namespace gb
