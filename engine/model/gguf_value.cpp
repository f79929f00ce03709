// GgufValue accessors, display and builders. Scalars live in scalar_bits as the
// file stored them, so reading one back is a memcpy of gguf_scalar_bytes().
#include "model/gguf_value.h"

#include <cstring>
#include <sstream>

#include "core/check.h"

namespace gb {

std::optional<GgufType> gguf_type_from_code(uint32_t code) {
  if (code > static_cast<uint32_t>(GgufType::Float64)) return std::nullopt;
  return static_cast<GgufType>(code);
}

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::Uint8: return "uint8";
    case GgufType::Int8: return "int8";
    case GgufType::Uint16: return "uint16";
    case GgufType::Int16: return "int16";
    case GgufType::Uint32: return "uint32";
    case GgufType::Int32: return "int32";
    case GgufType::Float32: return "float32";
    case GgufType::Bool: return "bool";
    case GgufType::String: return "string";
    case GgufType::Array: return "array";
    case GgufType::Uint64: return "uint64";
    case GgufType::Int64: return "int64";
    case GgufType::Float64: return "float64";
  }
  return "?";
}

size_t gguf_scalar_bytes(GgufType t) {
  switch (t) {
    case GgufType::Uint8: case GgufType::Int8: case GgufType::Bool: return 1;
    case GgufType::Uint16: case GgufType::Int16: return 2;
    case GgufType::Uint32: case GgufType::Int32: case GgufType::Float32: return 4;
    case GgufType::Uint64: case GgufType::Int64: case GgufType::Float64: return 8;
    case GgufType::String: case GgufType::Array: return 0;
  }
  return 0;
}

namespace {

// Decodes one scalar of type t from `bytes` (gguf_scalar_bytes(t) of them).
template <class T>
T load(const void* bytes) {
  T v;
  std::memcpy(&v, bytes, sizeof v);
  return v;
}

std::optional<int64_t> scalar_int(GgufType t, const void* p) {
  switch (t) {
    case GgufType::Uint8: return load<uint8_t>(p);
    case GgufType::Int8: return load<int8_t>(p);
    case GgufType::Uint16: return load<uint16_t>(p);
    case GgufType::Int16: return load<int16_t>(p);
    case GgufType::Uint32: return load<uint32_t>(p);
    case GgufType::Int32: return load<int32_t>(p);
    case GgufType::Int64: return load<int64_t>(p);
    case GgufType::Bool: return load<uint8_t>(p) != 0 ? 1 : 0;
    case GgufType::Uint64: {
      const uint64_t v = load<uint64_t>(p);
      if (v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
      return static_cast<int64_t>(v);
    }
    default: return std::nullopt;
  }
}

std::optional<double> scalar_double(GgufType t, const void* p) {
  if (t == GgufType::Float32) return load<float>(p);
  if (t == GgufType::Float64) return load<double>(p);
  if (t == GgufType::Uint64) return static_cast<double>(load<uint64_t>(p));
  if (auto i = scalar_int(t, p)) return static_cast<double>(*i);
  return std::nullopt;
}

template <class T>
GgufValue scalar(GgufType t, T v) {
  GgufValue out;
  out.type = t;
  std::memcpy(&out.scalar_bits, &v, sizeof v);
  return out;
}

}  // namespace

uint64_t GgufValue::array_size() const {
  if (!is_array()) return 0;
  if (element_type == GgufType::String) return strings.size();
  if (element_type == GgufType::Array) return arrays.size();
  return packed.size() / gguf_scalar_bytes(element_type);
}

std::optional<int64_t> GgufValue::as_int() const { return scalar_int(type, &scalar_bits); }

std::optional<uint64_t> GgufValue::as_uint() const {
  if (type == GgufType::Uint64) return scalar_bits;
  auto v = as_int();
  if (!v || *v < 0) return std::nullopt;
  return static_cast<uint64_t>(*v);
}

std::optional<double> GgufValue::as_double() const { return scalar_double(type, &scalar_bits); }

std::optional<bool> GgufValue::as_bool() const {
  if (type != GgufType::Bool) return std::nullopt;
  return scalar_bits != 0;
}

std::optional<std::string_view> GgufValue::as_string() const {
  if (type != GgufType::String) return std::nullopt;
  return std::string_view(string);
}

int64_t GgufValue::int_at(size_t i) const {
  GB_CHECK(is_array() && i < array_size());
  auto v = scalar_int(element_type, packed.data() + i * gguf_scalar_bytes(element_type));
  GB_CHECK(v.has_value());
  return *v;
}

double GgufValue::double_at(size_t i) const {
  GB_CHECK(is_array() && i < array_size());
  auto v = scalar_double(element_type, packed.data() + i * gguf_scalar_bytes(element_type));
  GB_CHECK(v.has_value());
  return *v;
}

std::string GgufValue::to_display(size_t max_chars) const {
  std::ostringstream os;
  switch (type) {
    case GgufType::String: os << string; break;
    case GgufType::Bool: os << (scalar_bits ? "true" : "false"); break;
    case GgufType::Float32: case GgufType::Float64: os << *as_double(); break;
    case GgufType::Uint64: os << scalar_bits; break;
    case GgufType::Array: {
      const uint64_t n = array_size();
      os << "[" << gguf_type_name(element_type) << " x " << n << "]";
      if (element_type == GgufType::String && n > 0) {
        os << " " << strings[0] << (n > 1 ? ", " + strings[1] : "") << (n > 2 ? ", ..." : "");
      } else if (element_type != GgufType::Array && n > 0) {
        os << " " << (element_type == GgufType::Float32 || element_type == GgufType::Float64
                          ? std::to_string(double_at(0)) : std::to_string(int_at(0)))
           << (n > 1 ? ", ..." : "");
      }
      break;
    }
    default: os << *as_int(); break;
  }
  std::string s = os.str();
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

GgufValue GgufValue::u8(uint8_t v) { return scalar(GgufType::Uint8, v); }
GgufValue GgufValue::i8(int8_t v) { return scalar(GgufType::Int8, v); }
GgufValue GgufValue::u16(uint16_t v) { return scalar(GgufType::Uint16, v); }
GgufValue GgufValue::i16(int16_t v) { return scalar(GgufType::Int16, v); }
GgufValue GgufValue::u32(uint32_t v) { return scalar(GgufType::Uint32, v); }
GgufValue GgufValue::i32(int32_t v) { return scalar(GgufType::Int32, v); }
GgufValue GgufValue::u64(uint64_t v) { return scalar(GgufType::Uint64, v); }
GgufValue GgufValue::i64(int64_t v) { return scalar(GgufType::Int64, v); }
GgufValue GgufValue::f32(float v) { return scalar(GgufType::Float32, v); }
GgufValue GgufValue::f64(double v) { return scalar(GgufType::Float64, v); }
GgufValue GgufValue::boolean(bool v) { return scalar(GgufType::Bool, static_cast<uint8_t>(v ? 1 : 0)); }

GgufValue GgufValue::str(std::string v) {
  GgufValue out;
  out.type = GgufType::String;
  out.string = std::move(v);
  return out;
}

GgufValue GgufValue::string_array(std::vector<std::string> v) {
  GgufValue out;
  out.type = GgufType::Array;
  out.element_type = GgufType::String;
  out.strings = std::move(v);
  return out;
}

GgufValue GgufValue::packed_array(GgufType t, std::vector<std::byte> bytes) {
  GB_CHECK(gguf_scalar_bytes(t) > 0 && bytes.size() % gguf_scalar_bytes(t) == 0);
  GgufValue out;
  out.type = GgufType::Array;
  out.element_type = t;
  out.packed = std::move(bytes);
  return out;
}

GgufValue GgufValue::f32_array(const std::vector<float>& v) {
  std::vector<std::byte> bytes(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  return packed_array(GgufType::Float32, std::move(bytes));
}

GgufValue GgufValue::i32_array(const std::vector<int32_t>& v) {
  std::vector<std::byte> bytes(v.size() * sizeof(int32_t));
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  return packed_array(GgufType::Int32, std::move(bytes));
}

GgufValue GgufValue::array_of_arrays(std::vector<GgufValue> v) {
  GgufValue out;
  out.type = GgufType::Array;
  out.element_type = GgufType::Array;
  out.arrays = std::move(v);
  return out;
}

}  // namespace gb
