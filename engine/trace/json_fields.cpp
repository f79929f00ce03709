// Implementation of the trace JSON helpers. Readers never call nlohmann's
// throwing accessors: every field is type- and range-checked first, so a bad
// file gives a message, not an exception.
#include "trace/json_fields.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>

#include "core/utf8.h"

namespace gb::trace_json {

using nlohmann::json;

json real(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

namespace {
// The finite floats whose shortest digits name a double that narrows to a
// different float (double rounding: 7.038531e-26 is nearest to a double that
// lies exactly halfway between two floats). An exhaustive check of all 2^32
// bit patterns (docs/trace-format.md) found only these two; the shortest digits
// are fixed by the C++ standard (to_chars) and strtod rounds correctly, so the
// list holds for any conforming library. They are written widened to double.
bool shortest_digits_round_badly(float value) {
  return (std::bit_cast<uint32_t>(value) & 0x7fffffffu) == 0x15ae43fdu;
}
}  // namespace

char* write_float(char* out, float value) {
  if (shortest_digits_round_badly(value))
    return nlohmann::detail::to_chars(out, out + kMaxFloatChars, static_cast<double>(value));
  char* p = out;
  if (std::signbit(value)) {
    *p++ = '-';
    value = -value;
  }
  if (value == 0.0f) {
    std::memcpy(p, "0.0", 3);
    return p + 3;
  }
  // The shortest round-trip digits (std::to_chars: exact, not an approximation
  // like Grisu2) in scientific form "d[.ddd]e[+-]xx", then nlohmann's layout
  // of a double (detail::dtoa_impl::format_buffer with exponents -4..15).
  char sci[32];
  const auto r = std::to_chars(sci, sci + sizeof sci, value, std::chars_format::scientific);
  char digits[12];
  int k = 0;
  const char* s = sci;
  for (; s < r.ptr && *s != 'e'; ++s)
    if (*s != '.') digits[k++] = *s;
  int e10 = 0;
  std::from_chars(s + (s[1] == '+' ? 2 : 1), r.ptr, e10);
  const int n = e10 + 1;  // the decimal point's place after the first n digits
  if (k <= n && n <= 15) {  // digits[000].0
    std::memcpy(p, digits, static_cast<size_t>(k));
    std::memset(p + k, '0', static_cast<size_t>(n - k));
    std::memcpy(p + n, ".0", 2);
    return p + n + 2;
  }
  if (0 < n && n <= 15) {  // dig.its
    std::memcpy(p, digits, static_cast<size_t>(n));
    p[n] = '.';
    std::memcpy(p + n + 1, digits + n, static_cast<size_t>(k - n));
    return p + k + 1;
  }
  if (-4 < n && n <= 0) {  // 0.[000]digits
    std::memcpy(p, "0.", 2);
    std::memset(p + 2, '0', static_cast<size_t>(-n));
    std::memcpy(p + 2 - n, digits, static_cast<size_t>(k));
    return p + 2 - n + k;
  }
  *p++ = digits[0];  // d[.igits]e+xx
  if (k > 1) {
    *p++ = '.';
    std::memcpy(p, digits + 1, static_cast<size_t>(k - 1));
    p += k - 1;
  }
  const int x = n - 1;
  *p++ = 'e';
  *p++ = x < 0 ? '-' : '+';
  const int a = x < 0 ? -x : x;
  if (a >= 100) *p++ = static_cast<char>('0' + a / 100);
  *p++ = static_cast<char>('0' + a / 10 % 10);
  *p++ = static_cast<char>('0' + a % 10);
  return p;
}

json real(float value) {
  if (!std::isfinite(value) || shortest_digits_round_badly(value)) return real(static_cast<double>(value));
  char buf[kMaxFloatChars];
  char* end = write_float(buf, value);
  double d = 0.0;
  std::from_chars(buf, end, d);
  return d;
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

namespace {
// A finite number that would narrow to an infinite float: at or beyond the
// midpoint between FLT_MAX and the next power of two, (2 - 2^-24) x 2^127
// (FLT_MAX's last bit is odd, so the tie rounds up). The shortest form of
// FLT_MAX, 3.4028235e+38, is just above FLT_MAX and below this, and narrows
// back to it. Compared, not cast: narrowing an out-of-range double is undefined.
constexpr double kFloatOverflow = (2.0 - 0x1p-24) * 0x1p127;
bool beyond_float(double v) { return std::isfinite(v) && std::fabs(v) >= kFloatOverflow; }
}  // namespace

float FieldReader::f32(const char* key) {
  const double v = f64(key);
  if (beyond_float(v)) {
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
    if (!v || beyond_float(*v)) {
      fail(std::string(key) + "[" + std::to_string(i) + "]", "expected a number in 32-bit float range");
      return {};
    }
    out.push_back(static_cast<float>(*v));
  }
  return out;
}

}  // namespace gb::trace_json
