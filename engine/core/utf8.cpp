// UTF-8 classification (see utf8.h). Table 3-7 of the Unicode standard gives
// the accepted second-byte range for each lead; the other continuation bytes are
// always 0x80..0xBF.
#include "core/utf8.h"

namespace gb {
namespace {

bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Second-byte range allowed after `lead`: narrower than 0x80..0xBF for the leads
// whose full range would admit overlong forms, surrogates or > U+10FFFF.
void second_byte_range(uint8_t lead, uint8_t& lo, uint8_t& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (lead == 0xE0) lo = 0xA0;       // overlong 3-byte
  else if (lead == 0xED) hi = 0x9F;  // surrogates
  else if (lead == 0xF0) lo = 0x90;  // overlong 4-byte
  else if (lead == 0xF4) hi = 0x8F;  // above U+10FFFF
}

}  // namespace

int utf8_sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

Utf8Step utf8_next(std::string_view text, size_t pos) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  const int length = utf8_sequence_length(lead);
  if (length == 0) return {Utf8Kind::Invalid, 1};
  if (length == 1) return {Utf8Kind::Complete, 1};
  for (int k = 1; k < length; ++k) {
    if (pos + static_cast<size_t>(k) >= text.size()) return {Utf8Kind::Incomplete, static_cast<size_t>(k)};
    const auto b = static_cast<uint8_t>(text[pos + static_cast<size_t>(k)]);
    bool ok = is_continuation(b);
    if (k == 1) {
      uint8_t lo = 0, hi = 0;
      second_byte_range(lead, lo, hi);
      ok = b >= lo && b <= hi;
    }
    if (!ok) return {Utf8Kind::Invalid, static_cast<size_t>(k)};
  }
  return {Utf8Kind::Complete, static_cast<size_t>(length)};
}

std::string utf8_sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = utf8_next(text, pos);
    if (step.kind == Utf8Kind::Complete) out.append(text.substr(pos, step.num_bytes));
    else out.append(kUtf8Replacement);
    pos += step.num_bytes;
  }
  return out;
}

std::string utf8_readable(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = utf8_next(text, pos);
    if (step.kind == Utf8Kind::Complete) {
      out.append(text.substr(pos, step.num_bytes));
    } else {
      for (size_t i = 0; i < step.num_bytes; ++i) {
        const auto b = static_cast<uint8_t>(text[pos + i]);
        out += "<0x";
        out += kHex[b >> 4];
        out += kHex[b & 0xF];
        out += '>';
      }
    }
    pos += step.num_bytes;
  }
  return out;
}

int encode_utf8(uint32_t cp, uint8_t out[4]) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

void append_utf8(std::string& out, uint32_t cp) {
  uint8_t buf[4];
  const int n = encode_utf8(cp, buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

}  // namespace gb
