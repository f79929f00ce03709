// GgufValue: one GGUF metadata value (a scalar, a string, or an array that may
// nest). Numeric arrays are kept packed exactly as stored (little-endian), so
// a 128k-entry score table costs its file size, not 128k objects. Plain value
// type; no thread rules beyond those of std::vector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gb {

// gguf_metadata_value_type codes from the GGUF specification.
enum class GgufType : uint32_t {
  Uint8 = 0, Int8 = 1, Uint16 = 2, Int16 = 3, Uint32 = 4, Int32 = 5, Float32 = 6,
  Bool = 7, String = 8, Array = 9, Uint64 = 10, Int64 = 11, Float64 = 12,
};

std::optional<GgufType> gguf_type_from_code(uint32_t code);
std::string_view gguf_type_name(GgufType t);
// Bytes of one scalar of type t; 0 for String and Array (variable length).
size_t gguf_scalar_bytes(GgufType t);

struct GgufValue {
  GgufType type = GgufType::Uint8;

  // type is a scalar: its bytes as stored, zero-extended into 8 bytes.
  uint64_t scalar_bits = 0;
  // type == String: the bytes (GGUF strings are UTF-8, not NUL-terminated).
  std::string string;
  // type == Array: element type and exactly one of the three containers below.
  GgufType element_type = GgufType::Uint8;
  std::vector<std::byte> packed;          // scalar elements: (num) x gguf_scalar_bytes
  std::vector<std::string> strings;       // String elements
  std::vector<GgufValue> arrays;          // nested Array elements

  bool is_array() const { return type == GgufType::Array; }
  uint64_t array_size() const;

  // Scalar readers: any integer type (and Bool) as int; any numeric as double.
  std::optional<int64_t> as_int() const;
  std::optional<uint64_t> as_uint() const;
  std::optional<double> as_double() const;
  std::optional<bool> as_bool() const;
  std::optional<std::string_view> as_string() const;
  // Element i of a numeric array (i < array_size(), numeric element type).
  int64_t int_at(size_t i) const;
  double double_at(size_t i) const;

  // A short human-readable form; long arrays and strings are summarised.
  std::string to_display(size_t max_chars = 96) const;

  // Builders (writer, synthetic models and tests).
  static GgufValue u8(uint8_t v);
  static GgufValue i8(int8_t v);
  static GgufValue u16(uint16_t v);
  static GgufValue i16(int16_t v);
  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue i64(int64_t v);
  static GgufValue f32(float v);
  static GgufValue f64(double v);
  static GgufValue boolean(bool v);
  static GgufValue str(std::string v);
  static GgufValue string_array(std::vector<std::string> v);
  static GgufValue f32_array(const std::vector<float>& v);
  static GgufValue i32_array(const std::vector<int32_t>& v);
  static GgufValue array_of_arrays(std::vector<GgufValue> v);
  // A numeric array of element type t from packed little-endian bytes.
  static GgufValue packed_array(GgufType t, std::vector<std::byte> bytes);

  bool operator==(const GgufValue&) const = default;
};

}  // namespace gb
