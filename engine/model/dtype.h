// Element types of weight tensors, with their sizes and the GGUF type codes.
// Adding a type (a quantized one later) is local: a new enumerator, its entry in
// dtype_info(), its GGUF code, and a row converter in kernels/cpu/convert.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gb {

enum class DType : uint8_t { F32, F16, BF16 };

struct DTypeInfo {
  std::string_view name;   // "F32"
  size_t block_elements;   // elements per storage block (1 for plain floats)
  size_t block_bytes;      // bytes per storage block
  uint32_t gguf_code;      // ggml_type value in GGUF files
};

constexpr DTypeInfo dtype_info(DType t) {
  switch (t) {
    case DType::F32: return {"F32", 1, 4, 0};
    case DType::F16: return {"F16", 1, 2, 1};
    case DType::BF16: return {"BF16", 1, 2, 30};
  }
  return {"?", 1, 0, 0xffffffffu};
}

// Bytes needed for `elements` values of type t; nullopt if elements is not a whole
// number of storage blocks.
constexpr std::optional<size_t> dtype_bytes(DType t, uint64_t elements) {
  const DTypeInfo info = dtype_info(t);
  if (elements % info.block_elements != 0) return std::nullopt;
  return static_cast<size_t>(elements / info.block_elements * info.block_bytes);
}

constexpr std::optional<DType> dtype_from_gguf(uint32_t code) {
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    if (dtype_info(t).gguf_code == code) return t;
  return std::nullopt;
}

}  // namespace gb
