// Grammar: a context-free grammar compiled to BYTES, the form every matcher in
// engine/grammar walks. GBNF text (gbnf.h) and JSON Schema (json_schema.h)
// compile to it; GrammarMatcher (grammar_matcher.h) advances on bytes;
// TokenMasks (token_masks.h) turns a matcher state into a vocabulary mask.
//
// Layout (flattened, after llama.cpp's grammar element arrays, written afresh):
//   elements   every alternative of every rule, back to back; an alternative is
//              a run of Bytes / Rule elements closed by one End element.
//   rules[r]   name and the position in `elements` where each alternative starts.
//   byte_sets  the 256-bit sets Bytes elements name (deduplicated).
// A GBNF character class becomes a helper rule whose alternatives are runs of
// byte sets (the UTF-8 encodings of its code-point ranges), so the matcher never
// decodes UTF-8: "[^\"]" accepts exactly the valid UTF-8 encodings of every
// scalar value except '"'. Repetitions become helper rules (right-recursive for
// unbounded ones, so a long run never deepens the stack).
//
// Invariants (checked by compile(), see gbnf.h): every Rule element names an
// existing rule; no rule can reach itself without consuming a byte (no left
// recursion, also not through rules that can match the empty string), so the
// matcher's expansion always ends.
// Threads: immutable after construction; share freely (std::shared_ptr<const Grammar>).
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

namespace gb {

struct GrammarElement {
  enum class Kind : uint8_t { End, Bytes, Rule };
  Kind kind = Kind::End;
  uint32_t value = 0;  // Bytes: index into byte_sets; Rule: index into rules
};

struct GrammarRule {
  std::string name;                   // GBNF name; helper rules are "name-3" style, not writable in GBNF
  std::vector<uint32_t> alternatives; // position in Grammar::elements of each alternative's first element
};

struct Grammar {
  std::vector<GrammarElement> elements;
  std::vector<GrammarRule> rules;
  std::vector<std::bitset<256>> byte_sets;
  uint32_t root = 0;     // the start rule
  std::string source;    // the text it was compiled from (GBNF), for display and traces

  // Size limits (a grammar above them is refused at compile time with an error
  // saying which limit; they bound the matcher's memory and the mask work).
  static constexpr size_t kMaxSourceBytes = 1u << 20;   // 1 MiB of GBNF text
  static constexpr size_t kMaxElements = 1u << 20;      // after expanding repetitions
  static constexpr size_t kMaxRules = 1u << 16;
  static constexpr uint32_t kMaxRepetition = 1000;      // the largest m or n in x{m,n}
};

}  // namespace gb
