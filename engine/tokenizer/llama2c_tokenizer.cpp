// Llama2cTokenizer (see llama2c_tokenizer.h).
#include "tokenizer/llama2c_tokenizer.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "tokenizer/bpe_merge.h"

namespace gb {
namespace {

// Far above any real file (the 32000-token Llama 2 file is 434 KB); guards against
// reading a multi-GB model by mistake.
constexpr size_t kMaxFileBytes = size_t{64} << 20;
constexpr uint32_t kMaxPieceBytes = 1u << 16;

}  // namespace

Result<std::shared_ptr<const Llama2cTokenizer>> Llama2cTokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot open tokenizer file");
  in.seekg(0, std::ios::end);
  const auto file_bytes = static_cast<size_t>(in.tellg());
  in.seekg(0);
  if (file_bytes > kMaxFileBytes)
    return make_error(path + ": " + std::to_string(file_bytes) + " bytes is too large for a llama2.c tokenizer file");
  std::string data(file_bytes, '\0');  // (file_bytes) the whole file
  if (!in.read(data.data(), static_cast<std::streamsize>(file_bytes)))
    return make_error(path + ": read failed");
  if (file_bytes < 4) return make_error(path + ": truncated llama2.c tokenizer (no max_token_len field)");

  auto read_u32 = [&](size_t at) {
    uint32_t v = 0;
    std::memcpy(&v, data.data() + at, 4);
    return v;
  };
  const uint32_t max_token_length = read_u32(0);
  std::vector<std::string> pieces;
  std::vector<float> scores;
  for (size_t at = 4; at < file_bytes;) {
    const std::string where = path + ": token " + std::to_string(pieces.size()) + " at byte " + std::to_string(at);
    if (file_bytes - at < 8) return make_error(where + ": truncated score/length fields");
    float score = 0.0f;
    std::memcpy(&score, data.data() + at, 4);
    const uint32_t num_bytes = read_u32(at + 4);
    at += 8;
    if (num_bytes > kMaxPieceBytes || num_bytes > file_bytes - at)
      return make_error(where + ": piece length " + std::to_string(num_bytes) + " runs past the end of the file");
    if (num_bytes > max_token_length)
      return make_error(where + ": piece length " + std::to_string(num_bytes) + " exceeds max_token_len " +
                        std::to_string(max_token_length));
    pieces.emplace_back(data.data() + at, num_bytes);
    scores.push_back(score);
    at += num_bytes;
  }
  auto result = from_pieces(std::move(pieces), std::move(scores), path);
  if (!result.ok()) return result.error();
  std::const_pointer_cast<Llama2cTokenizer>(result.value())->max_token_length_ = max_token_length;
  return result;
}

Result<std::shared_ptr<const Llama2cTokenizer>> Llama2cTokenizer::from_pieces(std::vector<std::string> pieces,
                                                                               std::vector<float> scores,
                                                                               std::string source_name) {
  if (pieces.size() < 3 || pieces.size() != scores.size())
    return make_error(source_name + ": a llama2.c vocabulary needs at least 3 tokens (unk, BOS, EOS) and one score per token");
  if (pieces.size() > static_cast<size_t>(INT32_MAX))
    return make_error(source_name + ": too many tokens");
  std::shared_ptr<Llama2cTokenizer> t(new Llama2cTokenizer());
  t->pieces_ = std::move(pieces);
  t->scores_ = std::move(scores);
  t->byte_value_.assign(t->pieces_.size(), -1);
  // run.c's fallback id is 3 + byte; use the <0xAB> piece where it exists so a
  // vocabulary with another layout still decodes what it encodes.
  for (int b = 0; b < 256; ++b) t->byte_token_[static_cast<size_t>(b)] = 3 + b;
  std::array<bool, 256> byte_seen{};
  for (size_t id = 0; id < t->pieces_.size(); ++id) {
    const std::string& piece = t->pieces_[id];
    t->index_.emplace(piece, static_cast<TokenId>(id));  // keeps the lowest id of a duplicate
    const int byte = parse_byte_piece(piece);
    if (byte < 0 || id <= 2) continue;
    t->byte_value_[id] = static_cast<int16_t>(byte);
    if (!byte_seen[static_cast<size_t>(byte)]) t->byte_token_[static_cast<size_t>(byte)] = static_cast<TokenId>(id);
    byte_seen[static_cast<size_t>(byte)] = true;
  }
  for (int b = 0; b < 256; ++b)
    if (t->byte_token_[static_cast<size_t>(b)] >= static_cast<TokenId>(t->pieces_.size()))
      return make_error(source_name + ": no byte-fallback token for byte " + std::to_string(b));
  return std::shared_ptr<const Llama2cTokenizer>(std::move(t));
}

void Llama2cTokenizer::encode_fragment(std::string_view text, bool at_boundary, std::vector<TokenId>& ids) const {
  if (text.empty()) return;
  std::string prefixed;  // the dummy-prefix space (run.c always adds it), then the text verbatim
  prefixed.reserve(text.size() + 1);
  if (at_boundary) prefixed.push_back(' ');
  prefixed.append(text);
  const BpeMergeResult merged = bpe_merge(prefixed, index_, scores_, /*isolate_unknown_characters=*/true);
  for (const BpeSegment& seg : merged.segments) {
    const std::string_view piece = std::string_view(prefixed).substr(seg.offset, seg.length);
    const TokenId id = seg.is_byte ? -1 : find_piece(index_, piece);
    if (id >= 0) {
      ids.push_back(id);
      continue;
    }
    for (const char c : piece) ids.push_back(byte_token_[static_cast<uint8_t>(c)]);
  }
}

bool Llama2cTokenizer::is_byte(TokenId id) const {
  return id >= 0 && id < vocab_size() && byte_value_[static_cast<size_t>(id)] >= 0;
}

std::string Llama2cTokenizer::token_bytes(TokenId id) const {
  GB_CHECK(id >= 0 && id < vocab_size());
  if (is_control(id)) return {};
  const int16_t byte = byte_value_[static_cast<size_t>(id)];
  if (byte >= 0) return std::string(1, static_cast<char>(byte));
  return pieces_[static_cast<size_t>(id)];
}

std::string Llama2cTokenizer::token_piece(TokenId id) const {
  GB_CHECK(id >= 0 && id < vocab_size());
  return pieces_[static_cast<size_t>(id)];
}

}  // namespace gb
