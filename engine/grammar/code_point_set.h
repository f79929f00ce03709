// CodePointSet: a set of Unicode scalar values as sorted, disjoint, non-adjacent
// ranges, and its two spellings in GBNF: a character class ("[a-z\x00]") for
// raw text, and the canonical JSON-string encoding of one character (for the
// inside of a JSON string: '"' as \", '\' as \\, controls as \b \f \n \r \t or
// \u00xx, everything else as itself). The JSON Schema and regex compilers
// (json_schema_emit.cpp, regex.cpp) build their character-level grammars from it.
//
// Invariants: ranges_ sorted by lo, lo <= hi, a gap of at least one code point
// between neighbours, never a surrogate (U+D800..U+DFFF), nothing above U+10FFFF.
// Threads: a value type; pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/utf8.h"  // append_utf8
#include "grammar/gbnf.h"  // gbnf_literal

#include "grammar/utf8_ranges.h"  // CodePointRange

namespace gb {

class CodePointSet {
 public:
  static constexpr uint32_t kMaxCodePoint = 0x10FFFF;

  static CodePointSet all();                            // every scalar value
  static CodePointSet range(uint32_t lo, uint32_t hi);  // surrogates removed
  static CodePointSet single(uint32_t cp) { return range(cp, cp); }

  void add(uint32_t lo, uint32_t hi);
  void add(const CodePointSet& other);
  CodePointSet complement() const;  // within all()
  CodePointSet minus(const CodePointSet& other) const;
  CodePointSet intersect(const CodePointSet& other) const;

  bool empty() const { return ranges_.empty(); }
  bool contains(uint32_t cp) const;
  const std::vector<CodePointRange>& ranges() const { return ranges_; }
  bool operator==(const CodePointSet& other) const;

  // "[a-z\x0a]": a GBNF class matching exactly the set (must not be empty).
  std::string gbnf_class() const;
  // A GBNF alternation matching the canonical JSON-string encoding of one member
  // (must not be empty), e.g. "[a-z] | \"\\\\\"" for [a-z\\].
  std::string gbnf_json_char() const;
  // A stable text naming the set, for deduplicating helper rules.
  std::string key() const;

 private:
  std::vector<CodePointRange> ranges_;
};

// The canonical JSON-string encoding of one code point: "\\\"" for '"', "\\n",
// "\\u001f", or the UTF-8 bytes.
std::string json_canonical_char(uint32_t cp);

}  // namespace gb
