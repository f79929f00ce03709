// Element conversions between storage types and float32 (IEEE half and bfloat16,
// round-to-nearest-even when narrowing). Pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gb::kernels {

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
inline float bf16_to_f32(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
uint16_t f32_to_bf16(float f);

void f16_to_f32_row(const uint16_t* src, float* dst, size_t n);
void bf16_to_f32_row(const uint16_t* src, float* dst, size_t n);

}  // namespace gb::kernels
