#include "cpu/convert.h"

namespace gb::kernels {

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;  // signed zero
    } else {        // subnormal: shift until the implicit bit appears
      uint32_t e = 0;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        ++e;
      }
      bits = sign | (127 - 15 + 1 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;  // inf / nan
  } else {
    bits = sign | (exp + (127 - 15)) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // nan
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // under half the smallest subnormal
    const uint32_t e = abs >> 23;                  // 102..112
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;                // 14..24
    uint32_t half_m = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_m & 1u))) ++half_m;
    return static_cast<uint16_t>(sign | half_m);
  }
  uint32_t h = (abs >> 13) - ((127 - 15) << 10);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry may roll into inf: correct
  return static_cast<uint16_t>(sign | h);
}

uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

void f16_to_f32_row(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

void bf16_to_f32_row(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

}  // namespace gb::kernels
