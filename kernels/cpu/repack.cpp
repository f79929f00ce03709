#include "cpu/repack.h"

#include <cstring>

#include "cpu/quant_blocks.h"

namespace gb::kernels {

void repack_row_q4_k_r(const void* src, void* dst, int64_t n) {
  const auto* b = static_cast<const uint8_t*>(src);
  auto* o = static_cast<uint8_t*>(dst);
  for (; n > 0; n -= 256, b += 144, o += 148) {
    std::memcpy(o, b, 4);  // f16 d, dmin
    for (int g = 0; g < 8; ++g) quant::k4_scale_min(g, b + 4, o[4 + g], o[12 + g]);
    uint8_t* codes = o + 20;
    std::memset(codes, 0, 128);
    const uint8_t* qs = b + 16;
    for (int g = 0; g < 8; ++g)
      for (int l = 0; l < 32; ++l) {
        const int q = (qs[32 * (g / 2) + l] >> (4 * (g % 2))) & 0xF;
        codes[quant::q4kr_code_byte(g, l)] |= static_cast<uint8_t>(q << quant::q4kr_code_shift(l));
      }
  }
}

void repack_row_q5_k_r(const void* src, void* dst, int64_t n) {
  const auto* b = static_cast<const uint8_t*>(src);
  auto* o = static_cast<uint8_t*>(dst);
  for (; n > 0; n -= 256, b += 176, o += 180) {
    std::memcpy(o, b, 4);  // f16 d, dmin
    for (int g = 0; g < 8; ++g) quant::k4_scale_min(g, b + 4, o[4 + g], o[12 + g]);
    uint8_t* hi = o + 20;
    uint8_t* codes = o + 52;
    std::memset(hi, 0, 32 + 128);
    const uint8_t* qh = b + 16;
    const uint8_t* qs = b + 48;
    for (int g = 0; g < 8; ++g)
      for (int l = 0; l < 32; ++l) {
        const int q = (qs[32 * (g / 2) + l] >> (4 * (g % 2))) & 0xF;
        codes[quant::q4kr_code_byte(g, l)] |= static_cast<uint8_t>(q << quant::q4kr_code_shift(l));
        hi[4 * g + l % 4] |= static_cast<uint8_t>(((qh[l] >> g) & 1) << quant::q5kr_high_bit(l));
      }
  }
}

void repack_row_q6_k_r(const void* src, void* dst, int64_t n) {
  const auto* b = static_cast<const uint8_t*>(src);
  auto* o = static_cast<uint8_t*>(dst);
  for (; n > 0; n -= 256, b += 210, o += 210) {
    std::memset(o, 0, 192);
    for (int g = 0; g < 8; ++g)
      for (int l = 0; l < 32; ++l) {
        const int q = quant::q6k_code(b, g, l);
        o[quant::q4kr_code_byte(g, l)] |= static_cast<uint8_t>((q & 0xF) << quant::q4kr_code_shift(l));
        o[128 + quant::q6kr_high_byte(g, l)] |= static_cast<uint8_t>((q >> 4) << quant::q6kr_high_shift(l));
      }
    std::memcpy(o + 192, b + 192, 18);  // scales, d
  }
}

}  // namespace gb::kernels
