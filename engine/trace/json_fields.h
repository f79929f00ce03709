// Helpers shared by the trace's JSON writers and readers (trace_json*.cpp,
// trace_header.cpp): exact float encoding, UTF-8 guarded text, and FieldReader,
// which pulls typed fields out of an object and remembers the first problem
// with its JSON path ("record.top[3].logit: expected a number") instead of
// throwing.
//
// Encoding rules (documented in docs/trace-format.md):
//   * Real numbers are written as JSON numbers with enough digits to give back
//     the same value: a double with the shortest digits that parse back to it, a
//     float with the shortest digits that parse back (as every reader parses: to
//     double, then narrowed) to that float, so both come back bit-identical.
//     Non-finite values are the strings "inf", "-inf", "nan" (JSON has no
//     literal for them).
//   * Text is valid UTF-8. If a string is not, the JSON carries the text with each
//     invalid run replaced by U+FFFD (core/utf8.h, utf8_sanitize) in `key` and the exact bytes as lowercase hex in
//     `key_hex`; readers prefer `key_hex`.
// Threads: pure functions / a stack value.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gb::trace_json {

nlohmann::json real(double value);
// A float's JSON number: the double nearest to write_float's digits, which
// nlohmann's dump() then writes as exactly those digits.
nlohmann::json real(float value);
// A finite float as the shortest decimal that reads back as the same float, laid
// out as nlohmann's dump() lays out a double ("0.1", "1.0", "1.5e-05", "1e+20"):
// 0.1f is "0.1" instead of the widened double's "0.10000000149011612" (the two
// floats whose shortest digits would read back wrong are written widened). Writes
// at most kMaxFloatChars characters at `out` and returns the end.
inline constexpr int kMaxFloatChars = 32;
char* write_float(char* out, float value);
bool is_valid_utf8(std::string_view text);
// Sets object[key] (and object[key + "_hex"] when the text is not UTF-8).
void put_text(nlohmann::json& object, const std::string& key, const std::string& text);
std::string to_hex(std::string_view bytes);
std::optional<std::string> from_hex(std::string_view hex);

class FieldReader {
 public:
  // `object` must outlive the reader; `path` prefixes field names in messages.
  FieldReader(const nlohmann::json& object, std::string path);

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  void fail(const std::string& field, const std::string& problem);
  void fail_with(const std::string& message) { if (error_.empty()) error_ = message; }
  // Takes over a nested reader's first error (if this one has none yet).
  void absorb(const FieldReader& child);

  bool has(const char* key) const;  // present and not null
  int64_t i64(const char* key, int64_t lo = std::numeric_limits<int64_t>::min(),
              int64_t hi = std::numeric_limits<int64_t>::max());
  int32_t i32(const char* key) { return static_cast<int32_t>(i64(key, INT32_MIN, INT32_MAX)); }
  uint64_t u64(const char* key);
  std::optional<uint64_t> optional_u64(const char* key);  // null or absent -> nullopt
  std::optional<int64_t> optional_i64(const char* key, int64_t lo, int64_t hi);
  double f64(const char* key);
  float f32(const char* key);  // finite values beyond float's range are an error
  bool boolean(const char* key);
  std::string str(const char* key);
  std::string text(const char* key);  // honours key_hex
  std::vector<int32_t> i32_array(const char* key);
  std::vector<float> f32_array(const char* key);
  const nlohmann::json* array(const char* key);   // nullptr (and an error) if not an array
  const nlohmann::json* object(const char* key);  // nullptr (and an error) if not an object

  std::string field_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

 private:
  const nlohmann::json* get(const char* key);  // error if missing

  const nlohmann::json& object_;
  std::string path_;
  std::string error_;
};

// Number (or "inf" / "-inf" / "nan") -> double; nullopt if j is neither.
std::optional<double> real_from(const nlohmann::json& j);
// Integer within [lo, hi] -> value; nullopt otherwise.
std::optional<int64_t> integer_from(const nlohmann::json& j, int64_t lo, int64_t hi);

}  // namespace gb::trace_json
