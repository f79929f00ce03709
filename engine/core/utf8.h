// UTF-8 scanning shared by the tokenizers and the streaming decoder: where one
// character ends, whether a byte run is a complete, a truncated or an invalid
// sequence. Pure functions; any thread.
//
// Validity follows RFC 3629 / Unicode Table 3-7: no overlong forms, no UTF-16
// surrogates (U+D800..U+DFFF), nothing above U+10FFFF. An invalid run is reported
// as its "maximal subpart" (the lead byte plus the continuation bytes that were
// still acceptable), which is the unit that gets one U+FFFD.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gb {

enum class Utf8Kind {
  Complete,    // a whole valid character of `num_bytes` bytes
  Incomplete,  // a valid prefix cut off by the end of the input (`num_bytes` present)
  Invalid,     // `num_bytes` (>= 1) bytes that can never start a valid character
};

struct Utf8Step {
  Utf8Kind kind;
  size_t num_bytes;
};

// Classifies the sequence starting at text[pos] (pos < text.size()).
Utf8Step utf8_next(std::string_view text, size_t pos);

// Length the lead byte announces: 1 for ASCII, 2..4 for a multi-byte lead, 0 for
// a byte that cannot lead (continuation bytes, 0xC0, 0xC1, 0xF5..0xFF).
int utf8_sequence_length(uint8_t lead);

// The UTF-8 encoding of code point `cp` (< 0x110000; surrogates are encoded
// as they come, callers that must refuse them check first): writes 1-4 bytes
// to `out` and returns how many; append_utf8 appends them to a string.
int encode_utf8(uint32_t cp, uint8_t out[4]);
void append_utf8(std::string& out, uint32_t cp);

// U+FFFD REPLACEMENT CHARACTER, the stand-in for invalid bytes.
inline constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";

// Replaces every invalid or truncated run with U+FFFD; valid text is unchanged.
std::string utf8_sanitize(std::string_view text);

// For showing one token's bytes: valid characters as they are, every byte of an
// invalid or truncated run as "<0xE2>" (a byte-level token that holds part of a
// character), so nothing is hidden behind U+FFFD.
std::string utf8_readable(std::string_view text);

}  // namespace gb
