// KV element types: how the paged KV cache stores K and V (chosen separately
// for each). One row per type, the single table the backends, the pool sizing,
// the CLI, the server and the workbench read; a type's storage, its
// quantize-on-write and its scalar read-back are its weight-type row's
// (weight_type.h), so a KV row only says which weight types may hold K or V and
// what a user calls them.
//
// Adding a KV type = one row in kv_type.cpp (a weight type with a quantize_row
// and 32-value or single-value blocks) and its conversion in kv_convert.inc for
// the SIMD attention kernels; the scalar oracle works from the row alone.
//
// Quantized types quantize each token's K or V row (kv_dim values) once when it
// is written, in blocks along the row, so kv_dim must be a whole number of
// blocks; the SIMD kernels also need each head's row to start on a block
// (head_dim a multiple of 32), else the scalar path runs.
//
// Rows are immutable; any thread may read them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cpu/attention_query.h"
#include "cpu/weight_type.h"

namespace gb::kernels {

struct KvTypeRow {
  WeightType type;
  KvElem elem;                   // what the SIMD attention kernels read it as (kv_convert.inc)
  std::string_view name;         // "q8_0": the CLI's and llama.cpp's spelling (-ctk q8_0)
  bool exact;                    // stores float32 values unchanged (F32 only)
  std::string_view description;  // one line for menus and --help
};

// Every KV type, in the order menus list them.
std::span<const KvTypeRow> kv_type_rows();
const KvTypeRow* kv_type_row(WeightType t);  // nullptr: not a KV type
// Case-insensitive; nullopt for a name that is not a KV type.
std::optional<WeightType> kv_type_from_name(std::string_view name);
std::string_view kv_type_name(WeightType t);  // "f16"; "?" for a type that is not a KV type
// "f32, f16, bf16, q8_0, ..." for error messages and help.
std::string kv_type_names();

// The default for both K and V: half of F32's bytes, and greedy output equal to
// F32's on the golden prompts (as llama.cpp's default).
inline constexpr WeightType kDefaultKvType = WeightType::F16;

// Bytes of one token's K (or V) row of kv_dim values in type t.
size_t kv_row_bytes(WeightType t, int64_t kv_dim);
// Empty when a model whose K/V rows hold kv_dim values can store them in t,
// else why not ("q8_0 stores blocks of 32 values; this model's K/V rows hold 24").
std::string kv_type_unsupported(WeightType t, int64_t kv_dim);

}  // namespace gb::kernels
