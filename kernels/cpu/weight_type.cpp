#include "cpu/weight_type.h"

#include <array>
#include <cctype>

#include "cpu/convert.h"
#include "cpu/dequantize.h"
#include "cpu/quantize.h"
#include "cpu/repack.h"

namespace gb::kernels {

namespace {

// Float weights with float32 activations: float accumulation in index order
// (the same arithmetic as matmul_reference).
template <DequantizeRowFn Dequantize, int BlockElements, int BlockBytes>
float vec_dot_f32_ref(int64_t n, const void* w_row, const void* act_row) {
  const auto* w = static_cast<const uint8_t*>(w_row);
  const auto* x = static_cast<const float*>(act_row);
  float buf[BlockElements];
  float acc = 0.0f;
  for (int64_t i = 0; i < n; i += BlockElements, w += BlockBytes) {
    Dequantize(w, buf, BlockElements);
    for (int j = 0; j < BlockElements; ++j) acc += buf[j] * x[i + j];
  }
  return acc;
}

// Quantized weights with ActBlockQ8 activations: both sides dequantized with the
// reference functions, products summed in double. Fast kernels use integer
// arithmetic within a block, so they differ from this only by float rounding.
template <DequantizeRowFn Dequantize, int BlockElements, int BlockBytes>
float vec_dot_q8_ref(int64_t n, const void* w_row, const void* act_row) {
  const auto* w = static_cast<const uint8_t*>(w_row);
  const auto* a = static_cast<const ActBlockQ8*>(act_row);
  float buf[BlockElements];
  double acc = 0.0;
  for (int64_t i = 0; i < n; i += BlockElements, w += BlockBytes) {
    Dequantize(w, buf, BlockElements);
    for (int j = 0; j < BlockElements; ++j) {
      const ActBlockQ8& ab = a[(i + j) / kActBlock];
      acc += static_cast<double>(buf[j]) * static_cast<double>(ab.d * static_cast<float>(ab.qs[(i + j) % kActBlock]));
    }
  }
  return static_cast<float>(acc);
}

// BF16 weights with bf16 activations: every product is exact in float32, summed
// in float32 in index order.
float vec_dot_bf16_ref(int64_t n, const void* w_row, const void* act_row) {
  const auto* w = static_cast<const uint16_t*>(w_row);
  const auto* x = static_cast<const uint16_t*>(act_row);
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc += bf16_to_f32(w[i]) * bf16_to_f32(x[i]);
  return acc;
}

template <DequantizeRowFn D, int BE, int BB, ActivationType A>
constexpr VecDotFn reference_dot() {
  if constexpr (A == ActivationType::F32) return &vec_dot_f32_ref<D, BE, BB>;
  else if constexpr (A == ActivationType::BF16) return &vec_dot_bf16_ref;
  else return &vec_dot_q8_ref<D, BE, BB>;
}

template <WeightType T, DequantizeRowFn D, QuantizeRowFn Q, int BE, int BB, ActivationType A,
          ScaleFormat S = ScaleFormat::F16>
constexpr WeightTypeTraits row(std::string_view name, uint32_t code, int16_t scale_offset, int16_t min_offset,
                               WeightType cpu_layout = T, RepackRowFn repack = nullptr, WeightType file_type = T) {
  return {T, name, code, BE, BB, A, D, reference_dot<D, BE, BB, A>(), Q, scale_offset, min_offset, S, cpu_layout,
          repack, file_type};
}

constexpr auto F = ActivationType::F32;
constexpr auto B = ActivationType::BF16;
constexpr auto Q = ActivationType::Q8;

// One row per type, in WeightType order. Scale offsets: where the f16 d (and
// dmin/m) of a block sits, for the NaN/Inf scan (MXFP4: its E8M0 exponent byte).
constexpr std::array<WeightTypeTraits, kNumWeightTypes> kTraits = {
    row<WeightType::F32, dequantize_row_f32, quantize_row_f32, 1, 4, F>("F32", 0, -1, -1),
    row<WeightType::F16, dequantize_row_f16, quantize_row_f16, 1, 2, F>("F16", 1, -1, -1),
    row<WeightType::BF16, dequantize_row_bf16, quantize_row_bf16, 1, 2, B>("BF16", 30, -1, -1),
    row<WeightType::Q4_0, dequantize_row_q4_0, quantize_row_q4_0, 32, 18, Q>("Q4_0", 2, 0, -1),
    row<WeightType::Q4_1, dequantize_row_q4_1, quantize_row_q4_1, 32, 20, Q>("Q4_1", 3, 0, 2),
    row<WeightType::Q5_0, dequantize_row_q5_0, quantize_row_q5_0, 32, 22, Q>("Q5_0", 6, 0, -1),
    row<WeightType::Q5_1, dequantize_row_q5_1, quantize_row_q5_1, 32, 24, Q>("Q5_1", 7, 0, 2),
    row<WeightType::Q8_0, dequantize_row_q8_0, quantize_row_q8_0, 32, 34, Q>("Q8_0", 8, 0, -1),
    row<WeightType::Q2_K, dequantize_row_q2_k, quantize_row_q2_k, 256, 84, Q>("Q2_K", 10, 80, 82),
    row<WeightType::Q3_K, dequantize_row_q3_k, quantize_row_q3_k, 256, 110, Q>("Q3_K", 11, 108, -1),
    row<WeightType::Q4_K, dequantize_row_q4_k, quantize_row_q4_k, 256, 144, Q>("Q4_K", 12, 0, 2, WeightType::Q4_K_R,
                                                                               repack_row_q4_k_r),
    row<WeightType::Q5_K, dequantize_row_q5_k, quantize_row_q5_k, 256, 176, Q>("Q5_K", 13, 0, 2, WeightType::Q5_K_R,
                                                                               repack_row_q5_k_r),
    row<WeightType::Q6_K, dequantize_row_q6_k, quantize_row_q6_k, 256, 210, Q>("Q6_K", 14, 208, -1, WeightType::Q6_K_R,
                                                                               repack_row_q6_k_r),
    row<WeightType::IQ4_NL, dequantize_row_iq4_nl, quantize_row_iq4_nl, 32, 18, Q>("IQ4_NL", 20, 0, -1),
    row<WeightType::IQ4_XS, dequantize_row_iq4_xs, quantize_row_iq4_xs, 256, 136, Q>("IQ4_XS", 23, 0, -1),
    row<WeightType::MXFP4, dequantize_row_mxfp4, quantize_row_mxfp4, 32, 17, Q, ScaleFormat::E8M0>("MXFP4", 39, 0, -1),
    row<WeightType::Q4_K_R, dequantize_row_q4_k_r, quantize_row_q4_k_r, 256, 148, Q>(
        "Q4_K_R", kNoGgufCode, 0, 2, WeightType::Q4_K_R, nullptr, WeightType::Q4_K),
    row<WeightType::Q5_K_R, dequantize_row_q5_k_r, quantize_row_q5_k_r, 256, 180, Q>(
        "Q5_K_R", kNoGgufCode, 0, 2, WeightType::Q5_K_R, nullptr, WeightType::Q5_K),
    row<WeightType::Q6_K_R, dequantize_row_q6_k_r, quantize_row_q6_k_r, 256, 210, Q>(
        "Q6_K_R", kNoGgufCode, 208, -1, WeightType::Q6_K_R, nullptr, WeightType::Q6_K),
};

constexpr bool table_in_enum_order() {
  for (size_t i = 0; i < kTraits.size(); ++i)
    if (static_cast<size_t>(kTraits[i].type) != i) return false;
  return true;
}
static_assert(table_in_enum_order());

// Every ggml_type code's name (GGUF specification), for error messages about
// types we do not run.
constexpr std::array<std::string_view, 40> kGgmlNames = {
    "F32",     "F16",      "Q4_0",     "Q4_1",  "Q4_2",  "Q4_3",   "Q5_0",  "Q5_1",
    "Q8_0",    "Q8_1",     "Q2_K",     "Q3_K",  "Q4_K",  "Q5_K",   "Q6_K",  "Q8_K",
    "IQ2_XXS", "IQ2_XS",   "IQ3_XXS",  "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
    "I8",      "I16",      "I32",      "I64",   "F64",   "IQ1_M",  "BF16",  "Q4_0_4_4",
    "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",   "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};

}  // namespace

const WeightTypeTraits& weight_traits(WeightType t) { return kTraits[static_cast<size_t>(t)]; }

std::optional<WeightType> weight_type_from_gguf(uint32_t code) {
  if (code == kNoGgufCode) return std::nullopt;
  for (const auto& r : kTraits)
    if (r.gguf_code == code) return r.type;
  return std::nullopt;
}

std::optional<WeightType> weight_type_from_name(std::string_view name) {
  for (const auto& r : kTraits) {
    if (r.name.size() != name.size() || r.gguf_code == kNoGgufCode) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i)
      same = std::toupper(static_cast<unsigned char>(name[i])) == static_cast<unsigned char>(r.name[i]);
    if (same) return r.type;
  }
  return std::nullopt;
}

std::string_view ggml_type_name(uint32_t code) { return code < kGgmlNames.size() ? kGgmlNames[code] : ""; }

}  // namespace gb::kernels
