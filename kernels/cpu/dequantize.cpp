// Scalar reference dequantization (see dequantize.h and quant_blocks.h). The
// float operations follow the specification's formulas in the same order
// (scale products first, then the value, then the min), and this file is built
// with -ffp-contract=off, so the results are bit-exact with gguf-py.
#include "cpu/dequantize.h"

#include <cstring>

#include "cpu/convert.h"
#include "cpu/quant_blocks.h"

namespace gb::kernels {

using namespace quant;

namespace {
const uint8_t* bytes(const void* p) { return static_cast<const uint8_t*>(p); }
float half(const uint8_t* p) { return f16_to_f32(read_u16(p)); }
}  // namespace

void dequantize_row_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void dequantize_row_f16(const void* src, float* dst, int64_t n) {
  f16_to_f32_row(static_cast<const uint16_t*>(src), dst, static_cast<size_t>(n));
}
void dequantize_row_bf16(const void* src, float* dst, int64_t n) {
  bf16_to_f32_row(static_cast<const uint16_t*>(src), dst, static_cast<size_t>(n));
}

void dequantize_row_q4_0(const void* src, float* dst, int64_t n) {
  for (const uint8_t* b = bytes(src); n > 0; n -= 32, b += 18, dst += 32) {
    const float d = half(b);
    for (int j = 0; j < 16; ++j) {
      dst[j] = static_cast<float>((b[2 + j] & 0xF) - 8) * d;
      dst[j + 16] = static_cast<float>((b[2 + j] >> 4) - 8) * d;
    }
  }
}

void dequantize_row_q4_1(const void* src, float* dst, int64_t n) {
  for (const uint8_t* b = bytes(src); n > 0; n -= 32, b += 20, dst += 32) {
    const float d = half(b), m = half(b + 2);
    for (int j = 0; j < 16; ++j) {
      dst[j] = static_cast<float>(b[4 + j] & 0xF) * d + m;
      dst[j + 16] = static_cast<float>(b[4 + j] >> 4) * d + m;
    }
  }
}

void dequantize_row_q5_0(const void* src, float* dst, int64_t n) {
  for (const uint8_t* b = bytes(src); n > 0; n -= 32, b += 22, dst += 32) {
    const float d = half(b);
    const uint32_t qh = read_u32(b + 2);
    for (int j = 0; j < 16; ++j) {
      const int lo = (b[6 + j] & 0xF) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (b[6 + j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      dst[j] = static_cast<float>(lo - 16) * d;
      dst[j + 16] = static_cast<float>(hi - 16) * d;
    }
  }
}

void dequantize_row_q5_1(const void* src, float* dst, int64_t n) {
  for (const uint8_t* b = bytes(src); n > 0; n -= 32, b += 24, dst += 32) {
    const float d = half(b), m = half(b + 2);
    const uint32_t qh = read_u32(b + 4);
    for (int j = 0; j < 16; ++j) {
      const int lo = (b[8 + j] & 0xF) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (b[8 + j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      dst[j] = static_cast<float>(lo) * d + m;
      dst[j + 16] = static_cast<float>(hi) * d + m;
    }
  }
}

void dequantize_row_q8_0(const void* src, float* dst, int64_t n) {
  for (const uint8_t* b = bytes(src); n > 0; n -= 32, b += 34, dst += 32) {
    const float d = half(b);
    for (int j = 0; j < 32; ++j) dst[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
  }
}

void dequantize_row_q2_k(const void* src, float* dst, int64_t n) {
  for (const uint8_t* b = bytes(src); n > 0; n -= 256, b += 84) {
    const uint8_t* scales = b;
    const uint8_t* qs = b + 16;
    const float d = half(b + 80), dmin = half(b + 82);
    for (int g = 0; g < 8; ++g) {
      const int h = g / 4, s = g % 4;
      for (int sub = 0; sub < 2; ++sub) {
        const uint8_t sc = scales[2 * g + sub];
        const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 16 * sub; l < 16 * sub + 16; ++l)
          *dst++ = dl * static_cast<float>((qs[32 * h + l] >> (2 * s)) & 3) - ml;
      }
    }
  }
}

void dequantize_row_q3_k(const void* src, float* dst, int64_t n) {
  for (const uint8_t* b = bytes(src); n > 0; n -= 256, b += 110) {
    const uint8_t* hmask = b;
    const uint8_t* qs = b + 32;
    const uint8_t* scales = b + 96;
    const float d = half(b + 108);
    for (int g = 0; g < 8; ++g) {
      const int h = g / 4, s = g % 4;
      for (int sub = 0; sub < 2; ++sub) {
        const float dl = d * static_cast<float>(q3k_scale(2 * g + sub, scales) - 32);
        for (int l = 16 * sub; l < 16 * sub + 16; ++l) {
          const int q = ((qs[32 * h + l] >> (2 * s)) & 3) - (((hmask[l] >> g) & 1) ? 0 : 4);
          *dst++ = dl * static_cast<float>(q);
        }
      }
    }
  }
}

void dequantize_row_q4_k(const void* src, float* dst, int64_t n) {
  for (const uint8_t* b = bytes(src); n > 0; n -= 256, b += 144) {
    const float d = half(b), dmin = half(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qs = b + 16;
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, m;
      k4_scale_min(g, scales, sc, m);
      const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
      const uint8_t* q = qs + 32 * (g / 2);
      const int shift = 4 * (g % 2);
      for (int l = 0; l < 32; ++l) *dst++ = dl * static_cast<float>((q[l] >> shift) & 0xF) - ml;
    }
  }
}

// The same formula as Q4_K (dl = d * scale, ml = dmin * min, x = dl * q - ml), so
// the values are Q4_K's bit for bit.
void dequantize_row_q4_k_r(const void* src, float* dst, int64_t n) {
  for (const uint8_t* b = bytes(src); n > 0; n -= 256, b += 148) {
    const float d = half(b), dmin = half(b + 2);
    for (int g = 0; g < 8; ++g) {
      const float dl = d * static_cast<float>(b[4 + g]), ml = dmin * static_cast<float>(b[12 + g]);
      for (int l = 0; l < 32; ++l)
        *dst++ = dl * static_cast<float>((b[20 + q4kr_code_byte(g, l)] >> q4kr_code_shift(l)) & 0xF) - ml;
    }
  }
}

void dequantize_row_q5_k(const void* src, float* dst, int64_t n) {
  for (const uint8_t* b = bytes(src); n > 0; n -= 256, b += 176) {
    const float d = half(b), dmin = half(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qh = b + 16;
    const uint8_t* qs = b + 48;
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, m;
      k4_scale_min(g, scales, sc, m);
      const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
      const uint8_t* q = qs + 32 * (g / 2);
      const int shift = 4 * (g % 2);
      for (int l = 0; l < 32; ++l) {
        const int v = ((q[l] >> shift) & 0xF) + (((qh[l] >> g) & 1) ? 16 : 0);
        *dst++ = dl * static_cast<float>(v) - ml;
      }
    }
  }
}

void dequantize_row_q6_k(const void* src, float* dst, int64_t n) {
  for (const uint8_t* b = bytes(src); n > 0; n -= 256, b += 210) {
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
    const float d = half(b + 208);
    for (int g = 0; g < 8; ++g) {
      const int h = g / 4, k = g % 4;
      const uint8_t* lo = ql + 64 * h + 32 * (k & 1);
      for (int l = 0; l < 32; ++l) {
        const int low = k < 2 ? (lo[l] & 0xF) : (lo[l] >> 4);
        const int q = (low | (((qh[32 * h + l] >> (2 * k)) & 3) << 4)) - 32;
        *dst++ = d * static_cast<float>(scales[2 * g + l / 16]) * static_cast<float>(q);
      }
    }
  }
}

// The same formula as Q5_K, so the values are Q5_K's bit for bit.
void dequantize_row_q5_k_r(const void* src, float* dst, int64_t n) {
  for (const uint8_t* b = bytes(src); n > 0; n -= 256, b += 180) {
    const float d = half(b), dmin = half(b + 2);
    for (int g = 0; g < 8; ++g) {
      const float dl = d * static_cast<float>(b[4 + g]), ml = dmin * static_cast<float>(b[12 + g]);
      for (int l = 0; l < 32; ++l) {
        const int low = (b[52 + q4kr_code_byte(g, l)] >> q4kr_code_shift(l)) & 0xF;
        const int high = (b[20 + 4 * g + l % 4] >> q5kr_high_bit(l)) & 1;
        *dst++ = dl * static_cast<float>(low | (high << 4)) - ml;
      }
    }
  }
}

// The same formula as Q6_K, so the values are Q6_K's bit for bit.
void dequantize_row_q6_k_r(const void* src, float* dst, int64_t n) {
  for (const uint8_t* b = bytes(src); n > 0; n -= 256, b += 210) {
    const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
    const float d = half(b + 208);
    for (int g = 0; g < 8; ++g)
      for (int l = 0; l < 32; ++l) {
        const int low = (b[q4kr_code_byte(g, l)] >> q4kr_code_shift(l)) & 0xF;
        const int q = (low | (((b[128 + q6kr_high_byte(g, l)] >> q6kr_high_shift(l)) & 3) << 4)) - 32;
        *dst++ = d * static_cast<float>(scales[2 * g + l / 16]) * static_cast<float>(q);
      }
  }
}

void dequantize_row_iq4_nl(const void* src, float* dst, int64_t n) {
  for (const uint8_t* b = bytes(src); n > 0; n -= 32, b += 18, dst += 32) {
    const float d = half(b);
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(kIq4nlValues[b[2 + j] & 0xF]);
      dst[j + 16] = d * static_cast<float>(kIq4nlValues[b[2 + j] >> 4]);
    }
  }
}

void dequantize_row_iq4_xs(const void* src, float* dst, int64_t n) {
  for (const uint8_t* b = bytes(src); n > 0; n -= 256, b += 136) {
    const float d = half(b);
    const uint16_t scales_h = read_u16(b + 2);
    const uint8_t* qs = b + 8;
    for (int g = 0; g < 8; ++g, dst += 32) {
      const float dl = d * static_cast<float>(iq4xs_scale(g, scales_h, b + 4) - 32);
      for (int j = 0; j < 16; ++j) {
        dst[j] = dl * static_cast<float>(kIq4nlValues[qs[16 * g + j] & 0xF]);
        dst[j + 16] = dl * static_cast<float>(kIq4nlValues[qs[16 * g + j] >> 4]);
      }
    }
  }
}

// The products are exact (a power of two times a small integer) unless they
// overflow, for e = 254 and 255, to infinity as gguf-py's do.
void dequantize_row_mxfp4(const void* src, float* dst, int64_t n) {
  for (const uint8_t* b = bytes(src); n > 0; n -= 32, b += 17, dst += 32) {
    const float d = e8m0_half(b[0]);
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(kMxfp4Values[b[1 + j] & 0xF]);
      dst[j + 16] = d * static_cast<float>(kMxfp4Values[b[1 + j] >> 4]);
    }
  }
}

}  // namespace gb::kernels
