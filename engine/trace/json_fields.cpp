// Implementation of the trace JSON helpers. Readers never call nlohmann's
// throwing accessors: every field is type- and range-checked first, so a bad
// file gives a message, not an exception.
#include "trace/json_fields.h"

#include <cmath>

#include "core/utf8.h"

namespace gb::trace_json {

using nlohmann::json;

json real(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

std::optional<double> real_from(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  return std::nullopt;
}

std::optional<int64_t> integer_from(const json& j, int64_t lo, int64_t hi) {
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    const auto s = static_cast<int64_t>(v);
    if (s < lo || s > hi) return std::nullopt;
    return s;
  }
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if (v < lo || v > hi) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

bool is_valid_utf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = utf8_next(text, pos);
    if (step.kind != Utf8Kind::Complete) return false;
    pos += step.num_bytes;
  }
  return true;
}

std::string to_hex(std::string_view bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;  // uppercase is not produced, so it is not accepted either
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

void put_text(json& object, const std::string& key, const std::string& text) {
  if (is_valid_utf8(text)) {
    object[key] = text;
    return;
  }
  object[key] = utf8_sanitize(text);
  object[key + "_hex"] = to_hex(text);
}

FieldReader::FieldReader(const json& object, std::string path) : object_(object), path_(std::move(path)) {
  if (!object_.is_object()) error_ = (path_.empty() ? std::string("event") : path_) + ": expected a JSON object";
}

void FieldReader::fail(const std::string& field, const std::string& problem) {
  if (error_.empty()) error_ = field_path(field) + ": " + problem;
}

void FieldReader::absorb(const FieldReader& child) {
  if (error_.empty() && !child.ok()) error_ = child.error_;
}

bool FieldReader::has(const char* key) const {
  if (!object_.is_object()) return false;
  const auto it = object_.find(key);
  return it != object_.end() && !it->is_null();
}

const json* FieldReader::get(const char* key) {
  if (!object_.is_object()) return nullptr;
  const auto it = object_.find(key);
  if (it == object_.end()) {
    fail(key, "missing field");
    return nullptr;
  }
  return &*it;
}

int64_t FieldReader::i64(const char* key, int64_t lo, int64_t hi) {
  const json* j = get(key);
  if (j == nullptr) return 0;
  const auto v = integer_from(*j, lo, hi);
  if (!v) {
    fail(key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + j->dump());
    return 0;
  }
  return *v;
}

uint64_t FieldReader::u64(const char* key) {
  const json* j = get(key);
  if (j == nullptr) return 0;
  if (j->is_number_unsigned()) return j->get<uint64_t>();
  if (j->is_number_integer() && j->get<int64_t>() >= 0) return static_cast<uint64_t>(j->get<int64_t>());
  fail(key, "expected a non-negative integer, got " + j->dump());
  return 0;
}

std::optional<uint64_t> FieldReader::optional_u64(const char* key) {
  if (!has(key)) return std::nullopt;
  return u64(key);
}

std::optional<int64_t> FieldReader::optional_i64(const char* key, int64_t lo, int64_t hi) {
  if (!has(key)) return std::nullopt;
  return i64(key, lo, hi);
}

double FieldReader::f64(const char* key) {
  const json* j = get(key);
  if (j == nullptr) return 0.0;
  const auto v = real_from(*j);
  if (!v) {
    fail(key, "expected a number (or \"inf\", \"-inf\", \"nan\"), got " + j->dump());
    return 0.0;
  }
  return *v;
}

float FieldReader::f32(const char* key) {
  const double v = f64(key);
  if (std::isfinite(v) && std::fabs(v) > static_cast<double>(std::numeric_limits<float>::max())) {
    fail(key, "number out of range for a 32-bit float");
    return 0.0f;
  }
  return static_cast<float>(v);
}

bool FieldReader::boolean(const char* key) {
  const json* j = get(key);
  if (j == nullptr) return false;
  if (!j->is_boolean()) {
    fail(key, "expected true or false, got " + j->dump());
    return false;
  }
  return j->get<bool>();
}

std::string FieldReader::str(const char* key) {
  const json* j = get(key);
  if (j == nullptr) return {};
  if (!j->is_string()) {
    fail(key, "expected a string, got " + j->dump());
    return {};
  }
  return j->get<std::string>();
}

std::string FieldReader::text(const char* key) {
  std::string plain = str(key);
  const std::string hex_key = std::string(key) + "_hex";
  if (!has(hex_key.c_str())) return plain;
  const std::string hex = str(hex_key.c_str());
  auto bytes = from_hex(hex);
  if (!bytes) {
    fail(hex_key, "expected lowercase hex digits in pairs");
    return {};
  }
  return *bytes;
}

const json* FieldReader::array(const char* key) {
  const json* j = get(key);
  if (j == nullptr) return nullptr;
  if (!j->is_array()) {
    fail(key, "expected an array");
    return nullptr;
  }
  return j;
}

const json* FieldReader::object(const char* key) {
  const json* j = get(key);
  if (j == nullptr) return nullptr;
  if (!j->is_object()) {
    fail(key, "expected an object");
    return nullptr;
  }
  return j;
}

std::vector<int32_t> FieldReader::i32_array(const char* key) {
  std::vector<int32_t> out;
  const json* a = array(key);
  if (a == nullptr) return out;
  out.reserve(a->size());
  for (size_t i = 0; i < a->size(); ++i) {
    const auto v = integer_from((*a)[i], INT32_MIN, INT32_MAX);
    if (!v) {
      fail(std::string(key) + "[" + std::to_string(i) + "]", "expected a 32-bit integer");
      return {};
    }
    out.push_back(static_cast<int32_t>(*v));
  }
  return out;
}

std::vector<float> FieldReader::f32_array(const char* key) {
  std::vector<float> out;
  const json* a = array(key);
  if (a == nullptr) return out;
  out.reserve(a->size());
  for (size_t i = 0; i < a->size(); ++i) {
    const auto v = real_from((*a)[i]);
    if (!v || (std::isfinite(*v) && std::fabs(*v) > static_cast<double>(std::numeric_limits<float>::max()))) {
      fail(std::string(key) + "[" + std::to_string(i) + "]", "expected a number in 32-bit float range");
      return {};
    }
    out.push_back(static_cast<float>(*v));
  }
  return out;
}

}  // namespace gb::trace_json
