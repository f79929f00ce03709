// Weight types: one row per storage type of a weight tensor (float, a GGML/GGUF
// quantized block format, or a CPU layout repacked from one at load), the single table the model loader, the CPU backend
// and the CUDA backend read. Matmul code never names a type: it looks up the row
// and calls its functions. Adding a type = an enumerator, one row in
// weight_type.cpp, its dequantize-row (dequantize.cpp) and, for speed, its
// AVX2 dot product (matmul_quant_avx2.cpp); the scalar path works from the row alone.
//
// Rows are immutable (constexpr data + function pointers); any thread may read them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gb::kernels {

enum class WeightType : uint8_t {
  F32, F16, BF16,
  Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
  Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
  IQ4_NL, IQ4_XS,
  MXFP4,
  // CPU layouts: never in a file; the CPU backend repacks a file type into one
  // at load (WeightTypeTraits::cpu_layout) where its kernels are measured faster.
  Q4_K_R, Q5_K_R, Q6_K_R,
};
inline constexpr int kNumWeightTypes = 19;
// gguf_code of the CPU layouts, which no file holds.
inline constexpr uint32_t kNoGgufCode = 0xFFFFFFFFu;

// What the dot product of a type multiplies its weights with. F32 and F16 take
// float32 activations as they are; BF16 takes activations rounded once per
// matmul to bfloat16 (to nearest even), so its products are exact in float32
// and run as bf16 dot products where the processor has them (what the model
// was trained with, and what the CUDA backend's GEMM does); quantized types
// take activations quantized once per matmul to ActBlockQ8 blocks (8-bit, 32
// values per block, a float32 scale and the per-16 sums the min terms of
// Q4_1/Q5_1/K-types need).
enum class ActivationType : uint8_t { F32, BF16, Q8 };

inline constexpr int kActBlock = 32;
struct ActBlockQ8 {
  float d;           // scale: value i = d * qs[i]
  int16_t sum[2];    // qs[0..15] and qs[16..31] summed
  int8_t qs[kActBlock];
};
static_assert(sizeof(ActBlockQ8) == 40);

// How a block type stores its scales (d, and dmin where it has one): an IEEE
// half (Q4_0 ... IQ4_XS), or an E8M0 byte (MXFP4: a bare biased power-of-two
// exponent, 0xFF meaning NaN in the OCP MX specification).
enum class ScaleFormat : uint8_t { F16, E8M0 };

// Dequantizes n values (a whole number of blocks) from src to float32.
using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
// Scalar reference dot product of one weight row (n values) with one activation
// row: float32 values for ActivationType::F32, bf16 values (uint16_t) for BF16,
// ActBlockQ8 blocks for Q8. This is the oracle the fast kernels are tested
// against.
using VecDotFn = float (*)(int64_t n, const void* w_row, const void* act_row);
// Quantizes n float32 values (a whole number of blocks) into blocks of the type.
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);
// Rewrites n values (a whole number of blocks) of a file type into its CPU layout.
using RepackRowFn = void (*)(const void* src, void* dst, int64_t n);

struct WeightTypeTraits {
  WeightType type;
  std::string_view name;     // "Q4_K", as GGUF tools print it
  uint32_t gguf_code;        // ggml_type value in GGUF files
  int32_t block_elements;    // values per block (1 for plain floats)
  int32_t block_bytes;       // bytes per block
  ActivationType activation; // what the dot product wants
  DequantizeRowFn dequantize_row;
  VecDotFn vec_dot;
  QuantizeRowFn quantize_row;
  // Byte offsets of the block scales (d, and dmin where the type has one)
  // inside a block, and how they are stored, for the NaN/Inf scan; -1 where
  // the type has none.
  int16_t scale_offset;
  int16_t min_offset;
  ScaleFormat scale_format;
  // The layout the CPU backend keeps this type in (the type itself, or a CPU
  // layout it repacks into at load with repack_row; same values, same results
  // bit for bit, faster kernels), and for a CPU layout the file type it comes from.
  WeightType cpu_layout;
  RepackRowFn repack_row;  // nullptr when cpu_layout is the type itself
  WeightType file_type;
};

const WeightTypeTraits& weight_traits(WeightType t);
std::optional<WeightType> weight_type_from_gguf(uint32_t code);
// File types only (a CPU layout's name is not a type a file or `quantize` can name).
std::optional<WeightType> weight_type_from_name(std::string_view name);  // case-insensitive

// Name of any ggml_type code, supported or not ("IQ2_XXS", "TQ1_0"), or "" if unknown.
std::string_view ggml_type_name(uint32_t code);

// Bytes for `elements` values of type t; nullopt if not a whole number of blocks.
inline std::optional<size_t> weight_bytes(WeightType t, uint64_t elements) {
  const WeightTypeTraits& w = weight_traits(t);
  if (elements % static_cast<uint64_t>(w.block_elements) != 0) return std::nullopt;
  return static_cast<size_t>(elements / static_cast<uint64_t>(w.block_elements) *
                             static_cast<uint64_t>(w.block_bytes));
}

// Whether the block scale at p (scale_offset or min_offset of a block) is NaN
// or infinite: an f16 with all exponent bits set, or the E8M0 NaN byte 0xFF.
inline bool scale_is_nan_or_inf(ScaleFormat f, const uint8_t* p) {
  if (f == ScaleFormat::E8M0) return p[0] == 0xFF;
  return ((p[0] | (p[1] << 8)) & 0x7c00) == 0x7c00;
}

// Block formats (Q4_0 ... MXFP4 and the CPU layouts), not plain floats.
inline bool is_quantized(WeightType t) { return weight_traits(t).block_elements > 1; }
// False for the CPU layouts.
inline bool is_file_type(WeightType t) { return weight_traits(t).gguf_code != kNoGgufCode; }

}  // namespace gb::kernels
