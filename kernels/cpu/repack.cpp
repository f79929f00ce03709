#include "cpu/repack.h"

#include <cstring>

#include "cpu/quant_blocks.h"

namespace gb::kernels {

// Byte loops over the transposed positions (byte 32k + 4g + j of a code
// array holds values 4k + j and 16 + 4k + j of group g), not value-by-value
// bit writes: a 600 MB Q4_K_M file repacks in a fraction of a second.

namespace {

// Q4_K/Q5_K: the nibble of group g's value l.
inline uint8_t k4_nibble(const uint8_t* qs, int g, int l) {
  return static_cast<uint8_t>((qs[32 * (g / 2) + l] >> (4 * (g % 2))) & 0xF);
}

void unpack_scales(const uint8_t* b, uint8_t* o) {
  std::memcpy(o, b, 4);  // f16 d, dmin
  for (int g = 0; g < 8; ++g) quant::k4_scale_min(g, b + 4, o[4 + g], o[12 + g]);
}

void transpose_k4_codes(const uint8_t* qs, uint8_t* codes) {
  for (int k = 0; k < 4; ++k)
    for (int g = 0; g < 8; ++g)
      for (int j = 0; j < 4; ++j)
        codes[32 * k + 4 * g + j] =
            static_cast<uint8_t>(k4_nibble(qs, g, 4 * k + j) | (k4_nibble(qs, g, 16 + 4 * k + j) << 4));
}

}  // namespace

void repack_row_q4_k_r(const void* src, void* dst, int64_t n) {
  const auto* b = static_cast<const uint8_t*>(src);
  auto* o = static_cast<uint8_t*>(dst);
  for (; n > 0; n -= 256, b += 144, o += 148) {
    unpack_scales(b, o);
    transpose_k4_codes(b + 16, o + 20);
  }
}

void repack_row_q5_k_r(const void* src, void* dst, int64_t n) {
  const auto* b = static_cast<const uint8_t*>(src);
  auto* o = static_cast<uint8_t*>(dst);
  for (; n > 0; n -= 256, b += 176, o += 180) {
    unpack_scales(b, o);
    transpose_k4_codes(b + 48, o + 52);
    // Bit k of byte 4g + j: the fifth bit (bit g of qh[l]) of the value in
    // lane g, byte j of transposed vector k (l = 4k + j, or 16 + 4(k-4) + j).
    const uint8_t* qh = b + 16;
    for (int g = 0; g < 8; ++g)
      for (int j = 0; j < 4; ++j) {
        uint8_t bits = 0;
        for (int k = 0; k < 8; ++k) {
          const int l = k < 4 ? 4 * k + j : 16 + 4 * (k - 4) + j;
          bits = static_cast<uint8_t>(bits | (((qh[l] >> g) & 1) << k));
        }
        o[20 + 4 * g + j] = bits;
      }
  }
}

void repack_row_q6_k_r(const void* src, void* dst, int64_t n) {
  const auto* b = static_cast<const uint8_t*>(src);
  auto* o = static_cast<uint8_t*>(dst);
  for (; n > 0; n -= 256, b += 210, o += 210) {
    uint8_t code[8][32];  // the 6-bit codes, value order
    for (int g = 0; g < 8; ++g)
      for (int l = 0; l < 32; ++l) code[g][l] = static_cast<uint8_t>(quant::q6k_code(b, g, l));
    for (int k = 0; k < 4; ++k)
      for (int g = 0; g < 8; ++g)
        for (int j = 0; j < 4; ++j) {
          const int l = 4 * k + j;
          o[32 * k + 4 * g + j] = static_cast<uint8_t>((code[g][l] & 0xF) | ((code[g][16 + l] & 0xF) << 4));
        }
    for (int m = 0; m < 2; ++m)
      for (int g = 0; g < 8; ++g)
        for (int j = 0; j < 4; ++j) {
          uint8_t bits = 0;
          for (int k = 0; k < 4; ++k) bits = static_cast<uint8_t>(bits | ((code[g][16 * m + 4 * k + j] >> 4) << (2 * k)));
          o[128 + 32 * m + 4 * g + j] = bits;
        }
    std::memcpy(o + 192, b + 192, 18);  // scales, d
  }
}

}  // namespace gb::kernels
