// SentencePieceTokenizer (see sentencepiece_tokenizer.h). The proto rewrite works
// on the protobuf wire format directly because Debian's libsentencepiece-dev
// ships no sentencepiece_model.pb.h.
#include "tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <fstream>
#include <iterator>

#include "core/exception_text.h"
#include "tokenizer/piece_index.h"

namespace gb {
namespace {

// ModelProto field numbers (sentencepiece_model.proto).
constexpr uint64_t kModelNormalizerSpec = 3;
constexpr uint64_t kModelSelfTestData = 4;
// NormalizerSpec.remove_extra_whitespaces (bool).
constexpr uint64_t kNormalizerRemoveExtraWhitespaces = 4;

bool read_varint(std::string_view data, size_t& pos, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= data.size()) return false;
    const auto b = static_cast<uint8_t>(data[pos++]);
    value |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (b < 0x80) return true;
  }
  return false;
}

void write_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

}  // namespace

std::string sentencepiece_proto_keep_whitespace(std::string_view proto, std::string& error) {
  std::string out;
  out.reserve(proto.size() + 8);
  bool saw_normalizer = false;
  for (size_t pos = 0; pos < proto.size();) {
    const size_t field_start = pos;
    uint64_t key = 0;
    if (!read_varint(proto, pos, key)) return error = "bad field key", std::string{};
    const uint64_t field = key >> 3;
    const uint64_t wire_type = key & 7;
    uint64_t length = 0;
    switch (wire_type) {
      case 0:
        if (!read_varint(proto, pos, length)) return error = "bad varint", std::string{};
        length = 0;
        break;
      case 1: length = 8; break;
      case 5: length = 4; break;
      case 2:
        if (!read_varint(proto, pos, length)) return error = "bad length", std::string{};
        break;
      default: return error = "unsupported wire type " + std::to_string(wire_type), std::string{};
    }
    if (length > proto.size() - pos) return error = "field runs past the end", std::string{};
    const std::string_view body = proto.substr(pos, length);
    pos += length;
    if (field == kModelSelfTestData) continue;
    if (field == kModelNormalizerSpec && wire_type == 2) {
      // A later occurrence of a scalar field wins, so appending the flag overrides
      // whatever the message held.
      std::string spec(body);
      write_varint(spec, kNormalizerRemoveExtraWhitespaces << 3);
      write_varint(spec, 0);
      write_varint(out, key);
      write_varint(out, spec.size());
      out.append(spec);
      saw_normalizer = true;
      continue;
    }
    out.append(proto.substr(field_start, pos - field_start));
  }
  if (!saw_normalizer) return error = "no normalizer_spec", std::string{};
  return out;
}

SentencePieceTokenizer::SentencePieceTokenizer() : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

Result<std::shared_ptr<const SentencePieceTokenizer>> SentencePieceTokenizer::load(const std::string& path,
                                                                                   const SentencePieceOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot open SentencePiece model");
  std::string proto((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!options.keep_model_normalizer) {
    std::string error;
    proto = sentencepiece_proto_keep_whitespace(proto, error);
    if (!error.empty()) return make_error(path + ": not a SentencePiece model proto (" + error + ")");
  }
  std::shared_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
  // The library reports most problems by status, but a few by exception from
  // code below it (an empty piece makes its trie builder throw, found by
  // fuzz_spm_model): both are a bad file, never a crash.
  sentencepiece::util::Status status;
  try {
    status = t->processor_->LoadFromSerializedProto(proto);
  } catch (const std::exception& e) {
    return make_error(path + ": SentencePiece could not load it: " + exception_sentence(e.what()));
  }
  if (!status.ok()) return make_error(path + ": SentencePiece could not load it: " + status.ToString());
  const int n = t->processor_->GetPieceSize();
  if (n <= 0) return make_error(path + ": SentencePiece model has no pieces");
  t->bos_id_ = t->processor_->bos_id();
  t->eos_id_ = t->processor_->eos_id();
  t->pieces_.resize(static_cast<size_t>(n));
  t->bytes_.resize(static_cast<size_t>(n));
  t->kinds_.resize(static_cast<size_t>(n));
  for (int id = 0; id < n; ++id) {
    const auto i = static_cast<size_t>(id);
    t->pieces_[i] = t->processor_->IdToPiece(id);
    if (t->processor_->IsControl(id) || t->processor_->IsUnknown(id)) {
      t->kinds_[i] = PieceKind::Control;
    } else if (t->processor_->IsByte(id)) {
      const int byte = parse_byte_piece(t->pieces_[i]);
      if (byte < 0) return make_error(path + ": byte piece " + std::to_string(id) + " is '" + t->pieces_[i] + "'");
      t->kinds_[i] = PieceKind::Byte;
      t->bytes_[i] = std::string(1, static_cast<char>(byte));
    } else {
      t->kinds_[i] = PieceKind::Text;
      std::string& text = t->bytes_[i];
      const std::string& piece = t->pieces_[i];
      for (size_t pos = 0; pos < piece.size();) {
        if (piece.compare(pos, kSpaceMark.size(), kSpaceMark) == 0) {
          text.push_back(' ');
          pos += kSpaceMark.size();
        } else {
          text.push_back(piece[pos++]);
        }
      }
    }
  }
  return std::shared_ptr<const SentencePieceTokenizer>(std::move(t));
}

void SentencePieceTokenizer::encode_fragment(std::string_view text, bool /*at_boundary*/,
                                             std::vector<TokenId>& ids) const {
  std::vector<int> raw;
  processor_->Encode(text, &raw).IgnoreError();  // fails only when no model is loaded
  ids.insert(ids.end(), raw.begin(), raw.end());
}

bool SentencePieceTokenizer::is_control(TokenId id) const {
  GB_CHECK(id >= 0 && id < vocab_size());
  return kinds_[static_cast<size_t>(id)] == PieceKind::Control;
}

bool SentencePieceTokenizer::is_byte(TokenId id) const {
  GB_CHECK(id >= 0 && id < vocab_size());
  return kinds_[static_cast<size_t>(id)] == PieceKind::Byte;
}

std::string SentencePieceTokenizer::token_bytes(TokenId id) const {
  GB_CHECK(id >= 0 && id < vocab_size());
  return bytes_[static_cast<size_t>(id)];
}

std::string SentencePieceTokenizer::token_piece(TokenId id) const {
  GB_CHECK(id >= 0 && id < vocab_size());
  return pieces_[static_cast<size_t>(id)];
}

}  // namespace gb
