// Helpers of the JSON Schema compiler (json_schema_compiler.h) on JSON values and
// pointers: JSON-pointer children, the type bits of a type name or a value,
// JSON Schema equality (1 == 1.0; objects regardless of key order), code
// points of UTF-8 text, object keys as GBNF literals, rule-name hints.
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "grammar/json_schema_numbers.h"

namespace gb::json_schema_values {

// Bits of the JSON value kinds; "integer" is kInt, "number" is kInt | kFrac.
enum TypeBits : uint8_t {
  kNull = 1, kBool = 2, kInt = 4, kFrac = 8, kString = 16, kArray = 32, kObject = 64, kAllTypes = 127
};

std::string where(const std::string& pointer);                             // "#" + pointer
std::string child(const std::string& pointer, const std::string& token);  // pointer + "/" + escaped token
uint8_t type_bit(const std::string& name);          // 0 for an unknown name
Result<Decimal> decimal_of(const nlohmann::ordered_json& v);
uint8_t value_bit(const nlohmann::ordered_json& v);  // kInt for 2.0
bool json_equal(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b);
// The code points of UTF-8 text; false if it is not valid UTF-8.
bool decode_utf8(const std::string& text, std::vector<uint32_t>& out);
// "\"name\"" in canonical JSON escaping, as a GBNF literal.
std::string json_key_literal(const std::vector<uint32_t>& cps);
// Lowercase letters, digits and '-' from a pointer's last token, for rule names.
std::string name_hint(const std::string& pointer);

}  // namespace gb::json_schema_values
