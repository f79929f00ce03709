// Weight tensor types as the engine sees them. The types themselves, their block
// sizes, GGUF codes and kernels live in one table owned by kernels/
// (kernels/cpu/weight_type.h); the engine names the enum WeightType, brought
// into gb here, and the helpers below give it the engine's size and GGUF
// lookups. Header-only, no state: any thread may call them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "cpu/weight_type.h"

namespace gb {

using kernels::WeightType;

struct WeightTypeInfo {
  std::string_view name;   // "F32", "Q4_K"
  size_t block_elements;   // elements per storage block (1 for plain floats)
  size_t block_bytes;      // bytes per storage block
  uint32_t gguf_code;      // ggml_type value in GGUF files
};

inline WeightTypeInfo dtype_info(WeightType t) {
  const kernels::WeightTypeTraits& w = kernels::weight_traits(t);
  return {w.name, static_cast<size_t>(w.block_elements), static_cast<size_t>(w.block_bytes), w.gguf_code};
}

// Bytes needed for `elements` values of type t; nullopt if elements is not a whole
// number of storage blocks.
inline std::optional<size_t> dtype_bytes(WeightType t, uint64_t elements) { return kernels::weight_bytes(t, elements); }

inline std::optional<WeightType> dtype_from_gguf(uint32_t code) { return kernels::weight_type_from_gguf(code); }

}  // namespace gb
