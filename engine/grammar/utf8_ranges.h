// Code-point ranges and their UTF-8 encodings as runs of byte ranges, so that a
// character class compiles to byte sets (grammar.h). Pure functions; any thread.
//
// utf8_byte_runs splits each code-point range until every piece has one
// encoded length and, byte position by byte position, a contiguous byte range
// (the construction RE2 and Go's regexp/syntax describe): [U+0080, U+07FF] is
// the one run [C2-DF][80-BF]; [U+0800, U+FFFF] minus surrogates is
// [E0][A0-BF][80-BF], [E1-EC][80-BF][80-BF], [ED][80-9F][80-BF], [EE-EF][80-BF][80-BF].
// Invariant: the runs of a range set match exactly the UTF-8 encodings of its
// code points (surrogates must have been removed first).
#pragma once

#include <cstdint>
#include <vector>

#include "core/utf8.h"  // encode_utf8

namespace gb {

struct CodePointRange {
  uint32_t lo;
  uint32_t hi;  // inclusive
};

struct ByteRange {
  uint8_t lo;
  uint8_t hi;  // inclusive
};
using Utf8ByteRun = std::vector<ByteRange>;  // one range per byte of the encoding

inline bool valid_scalar(uint32_t cp) { return cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF); }
inline int utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// Sorted, merged (overlapping and adjacent ranges joined).
std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges);
// [0, U+10FFFF] minus `ranges` (normalized), surrogates excluded.
std::vector<CodePointRange> complement_ranges(const std::vector<CodePointRange>& ranges);
// `ranges` (normalized) minus U+D800..U+DFFF.
std::vector<CodePointRange> remove_surrogates(const std::vector<CodePointRange>& ranges);
// The UTF-8 encodings of `ranges` (normalized, no surrogates) as byte-range runs.
std::vector<Utf8ByteRun> utf8_byte_runs(const std::vector<CodePointRange>& ranges);

}  // namespace gb
