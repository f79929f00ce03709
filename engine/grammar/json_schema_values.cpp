// JSON value and pointer helpers of the schema compiler (json_schema_values.h).
#include "grammar/json_schema_values.h"

#include "core/utf8.h"
#include "grammar/code_point_set.h"
#include "grammar/json_schema.h"

namespace gb::json_schema_values {

using ojson = nlohmann::ordered_json;

std::string where(const std::string& pointer) { return "#" + pointer; }
std::string child(const std::string& pointer, const std::string& token) {
  std::string escaped;
  for (const char c : token) {
    if (c == '~') escaped += "~0";
    else if (c == '/') escaped += "~1";
    else escaped += c;
  }
  return pointer + "/" + escaped;
}

uint8_t type_bit(const std::string& name) {
  if (name == "null") return kNull;
  if (name == "boolean") return kBool;
  if (name == "integer") return kInt;
  if (name == "number") return kInt | kFrac;
  if (name == "string") return kString;
  if (name == "array") return kArray;
  if (name == "object") return kObject;
  return 0;
}

Result<Decimal> decimal_of(const ojson& v) { return parse_decimal(v.dump(), kJsonSchemaMaxDigits); }

uint8_t value_bit(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null: return kNull;
    case ojson::value_t::boolean: return kBool;
    case ojson::value_t::string: return kString;
    case ojson::value_t::array: return kArray;
    case ojson::value_t::object: return kObject;
    case ojson::value_t::number_integer:
    case ojson::value_t::number_unsigned: return kInt;
    case ojson::value_t::number_float: {
      auto d = decimal_of(v);
      return d.ok() && d->is_integer() ? kInt : kFrac;
    }
    default: return 0;
  }
}

// JSON Schema equality: numbers by value (1 == 1.0), objects regardless of key order.
bool json_equal(const ojson& a, const ojson& b) {
  if (a.is_number() && b.is_number()) {
    auto da = decimal_of(a), db = decimal_of(b);
    return da.ok() && db.ok() && compare_decimal(*da, *db) == 0;
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!json_equal(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto jt = b.find(it.key());
      if (jt == b.end() || !json_equal(*it, *jt)) return false;
    }
    return true;
  }
  return a == b;
}

// The code points of UTF-8 text; false if it is not valid UTF-8.
bool decode_utf8(const std::string& text, std::vector<uint32_t>& out) {
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = utf8_next(text, pos);
    if (step.kind != Utf8Kind::Complete) return false;
    const auto lead = static_cast<uint8_t>(text[pos]);
    uint32_t cp = step.num_bytes == 1 ? lead : lead & (0xFFu >> (step.num_bytes + 1));
    for (size_t i = 1; i < step.num_bytes; ++i) cp = (cp << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3Fu);
    out.push_back(cp);
    pos += step.num_bytes;
  }
  return true;
}

// "\"name\"" in canonical JSON escaping, as a GBNF literal.
std::string json_key_literal(const std::vector<uint32_t>& cps) {
  std::string text = "\"";
  for (const uint32_t cp : cps) text += json_canonical_char(cp);
  return gbnf_literal(text + "\"");
}

// Lowercase letters, digits and '-' from a pointer's last token, for rule names.
std::string name_hint(const std::string& pointer) {
  if (pointer.empty()) return "root";
  std::string token = pointer.substr(pointer.rfind('/') + 1), out;
  for (const char c : token) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) out += c;
    if (out.size() >= 16) break;
  }
  return out.empty() ? "s" : out;
}

}  // namespace gb::json_schema_values
