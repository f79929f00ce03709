// JSON Schema (draft 2020-12) -> GBNF text whose rule "root" accepts the JSON
// texts that are valid under the schema, and "any JSON object" for OpenAI's
// json_object mode. docs/grammars.md has the full account; in short:
//
// Supported: boolean schemas; type (and lists); enum; const; properties;
// required; additionalProperties; items; prefixItems; minItems; maxItems;
// minLength; maxLength (code points); pattern (regex.h, search semantics);
// minimum / maximum / exclusiveMinimum / exclusiveMaximum (exact, on integers
// and decimals); anyOf; oneOf (only when its branches are provably disjoint);
// allOf (merged keyword by keyword: exact); $ref to "#", "#/$defs/..",
// "#/definitions/.." or any JSON pointer in the document (recursion allowed);
// $defs / definitions; annotations (title, description, $comment, examples,
// default, deprecated, readOnly, writeOnly, $schema, $anchor, $dynamicAnchor,
// $id at the root) are ignored.
// Refused (an error naming the keyword and its JSON pointer): every other
// keyword (not, if/then/else, patternProperties, propertyNames, contains,
// uniqueItems, multipleOf, minProperties, dependent*, unevaluated*, format,
// $dynamicRef, ...), remote or anchor $refs, $id below the root, oneOf whose
// branches may overlap, two different patterns on one string, pattern together
// with min/maxLength, enum/const beside object or array constraints.
//
// The shape of what is accepted (tightenings, never loosenings):
//   - object keys in a fixed order: `properties` in schema order, then
//     required names that are not in `properties`, then additional properties;
//     each optional property may be skipped;
//   - whitespace: at most `max_whitespace` bytes of [ \t\n] between tokens, none
//     before or after the value (the compact serialization is always accepted);
//   - numbers under bounds or enum/const, and integers, are written without an
//     exponent (1.0 and 1.00 are integers; 1e2 is refused);
//   - strings constrained by `pattern`, enum/const strings and additional
//     property names use the canonical JSON escaping (code_point_set.h).
// Limits: kMaxRules generated rules, Grammar::kMaxSourceBytes of GBNF, nesting
// depth kMaxDepth, bounds of kMaxDigits digits, counts (min/max length/items)
// up to kMaxCount; each is an error naming it.
// Threads: pure functions, any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gb {

struct JsonSchemaOptions {
  uint32_t max_whitespace = 20;  // bytes of [ \t\n] allowed between two tokens (0: compact only)
  size_t max_rules = 20000;      // generated GBNF rules
};

constexpr size_t kJsonSchemaMaxDepth = 64;      // nested subschemas being compiled at once
constexpr size_t kJsonSchemaMaxDigits = 400;    // digits of a numeric bound or const
constexpr uint64_t kJsonSchemaMaxCount = 100000; // minLength / maxLength / minItems / maxItems
// Numbers are bounded so sampling cannot loop on digits: at most this many
// digits before the point and after it (more when a bound or const has more),
// exponents of at most 3 digits. A longer valid number is refused (a
// tightening, docs/grammars.md).
constexpr int kJsonNumberMaxIntDigits = 20;
constexpr int kJsonNumberMaxFracDigits = 16;

// `schema` keeps its text's key order (properties order matters).
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options = {});
// With nlohmann::json (std::map) the properties come in name order.
Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema, const JsonSchemaOptions& options = {});
// JSON text (key order kept); a parse error is an Error. A name of its own: a
// string literal converts to nlohmann::json as readily as to std::string_view.
Result<std::string> json_schema_text_to_gbnf(std::string_view schema_text, const JsonSchemaOptions& options = {});

// Any JSON object (root) with any values inside: OpenAI's {"type":"json_object"}.
std::string json_any_value_gbnf(const JsonSchemaOptions& options = {});

}  // namespace gb
