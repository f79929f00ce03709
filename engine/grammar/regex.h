// Regular expressions (the ECMA-262 subset that JSON Schema `pattern` and a
// user's "regex constraint" use) compiled to GBNF text.
//
// Supported: literal characters (any UTF-8), escapes \t \n \r \f \v \0 \xHH
// \uHHHH (surrogate pairs joined) \cX and escaped metacharacters; `.` (any
// character but \n \r U+2028 U+2029); classes [...] and [^...] with ranges and
// \d \w \s \D \W \S inside; \d \w \s \D \W \S; groups (...), (?:...),
// (?<name>...); alternation |; quantifiers * + ? {m} {m,} {m,n} (lazy forms
// such as *? read as greedy: the same language); anchors ^ and $ at the start
// and end of a top-level alternative only. A `{` that does not start a
// quantifier, and a lone `}` or `]`, are literal (ECMA-262 Annex B).
// Refused, with an error naming the feature and its offset: backreferences
// (\1, \k<name>), lookahead/lookbehind, word boundaries \b \B, Unicode property
// escapes \p{..} \P{..}, \u{...}, other letter escapes, anchors anywhere else,
// empty classes, counts above kMaxRepetition, nesting deeper than kMaxDepth.
//
// Semantics: `anchored` = the whole text must match (a regex constraint);
// unanchored = search semantics (JSON Schema): a match anywhere, i.e.
// `.*(pattern).*` with `.` any character, except that an alternative starting
// with ^ / ending with $ is not padded on that side.
// In JSON-string mode the grammar matches the *inside* of a JSON string (no
// quotes) whose decoded text matches, every character written in its canonical
// JSON encoding (code_point_set.h: \" \\ \b \f \n \r \t, other controls \u00xx,
// everything else as itself). A string that spells a character another way
// ("\u0041" for "A", "\/") is refused: a tightening, never a loosening.
// Threads: pure functions, any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gb {

struct RegexGbnfOptions {
  bool anchored = true;
  bool json_string = false;           // match the inside of a JSON string (see above)
  std::string rule_prefix = "regex";  // helper rules are named <prefix>-c<N>
};

// A regex compiled to a GBNF expression plus the helper rules it names.
struct RegexGbnf {
  std::string expression;     // a GBNF expression for exactly the language; "" when that is only the empty text
  bool can_be_empty = false;  // the empty text is in the language
  std::string rules;       // helper rule lines ("name ::= body\n"), possibly empty
};

constexpr uint32_t kRegexMaxRepetition = 1000;  // the largest m or n in x{m,n}
constexpr int kRegexMaxDepth = 64;               // nesting of groups
constexpr size_t kRegexMaxPatternBytes = 64 * 1024;

Result<RegexGbnf> regex_to_gbnf_parts(std::string_view pattern, const RegexGbnfOptions& options);

// A complete GBNF grammar (start rule "root") for raw text matching `pattern`.
// An error if only the empty text would match (a grammar must produce something).
Result<std::string> regex_to_gbnf(std::string_view pattern, bool anchored = true);

}  // namespace gb
