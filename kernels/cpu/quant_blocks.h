// Byte layouts of the GGML/GGUF quantized blocks (written from the GGUF
// specification's block definitions; all multi-byte fields little-endian, f16
// scales IEEE half). Shared by the scalar reference, the AVX2 kernels and the
// quantizer so every reader agrees on offsets. Pure data; any thread.
//
//   Q4_0   (32 values, 18 B): f16 d | u8 qs[16]         x = d * (nibble - 8); low nibbles = values 0..15
//   Q4_1   (32, 20 B): f16 d | f16 m | u8 qs[16]        x = d * nibble + m
//   Q5_0   (32, 22 B): f16 d | u32 qh | u8 qs[16]       x = d * ((nibble | bit<<4) - 16); bit j of qh = value j
//   Q5_1   (32, 24 B): f16 d | f16 m | u32 qh | qs[16]  x = d * (nibble | bit<<4) + m
//   Q8_0   (32, 34 B): f16 d | i8 qs[32]                x = d * q
//   IQ4_NL (32, 18 B): f16 d | u8 qs[16]                x = d * kIq4nlValues[nibble]
//   Q2_K  (256, 84 B): u8 scales[16] | u8 qs[64] | f16 d | f16 dmin
//   Q3_K  (256, 110 B): u8 hmask[32] | u8 qs[64] | u8 scales[12] | f16 d
//   Q4_K  (256, 144 B): f16 d | f16 dmin | u8 scales[12] | u8 qs[128]
//   Q5_K  (256, 176 B): f16 d | f16 dmin | u8 scales[12] | u8 qh[32] | u8 qs[128]
//   Q6_K  (256, 210 B): u8 ql[128] | u8 qh[64] | i8 scales[16] | f16 d
//   IQ4_XS (256, 136 B): f16 d | u16 scales_h | u8 scales_l[4] | u8 qs[128]
//   MXFP4  (32, 17 B): u8 e | u8 qs[16]                 x = kMxfp4Values[nibble] * 2^(e - 128); low nibbles = values 0..15
//          e is an E8M0 exponent (OCP MX: 2^(e - 127), 0xFF NaN); the table holds
//          the E2M1 values doubled, hence 2^(e - 128). As in gguf-py/ggml, e = 0
//          and 1 are the subnormal floats 2^-128 and 2^-127, and e = 0xFF is read
//          as 2^127 (the loader's scan rejects it first: scale_is_nan_or_inf).
//   Q4_K_R (256, 148 B, a CPU layout, never in a file): f16 d | f16 dmin |
//          u8 scale[8] | u8 min[8] | u8 codes[128]: Q4_K with the 6-bit scales
//          and mins unpacked and the codes transposed, byte 32k + 4g + j
//          (k, j = 0..3, g = 0..7) holding value 4k + j of group g in its low
//          nibble and value 16 + 4k + j in its high one (so vector k of a unit
//          has group g's codes in lane g: one accumulator per unit gathers the 8
//          group sums with no horizontal adds; kernels/cpu/repack.h)
//   Q6_K_R (256, 210 B, a CPU layout): u8 lo[128] | u8 hi[64] | i8 scales[16] |
//          f16 d: Q6_K transposed the same way. lo: byte 32k + 4g + j holds the
//          low 4 bits of value 4k + j of group g (low nibble) and of value
//          16 + 4k + j (high nibble); hi: byte 32m + 4g + j holds the high 2
//          bits of value 16m + 4k + j of group g at bits 2k, 2k+1 (k = 0..3).
//          Scales and d as in Q6_K.
//   Q5_K_R (256, 180 B, a CPU layout): Q4_K_R's 20 bytes of d, dmin, scales and
//          mins | u8 hi[32] | u8 codes[128] as Q4_K_R's: bit k of hi byte
//          4g + j is the fifth bit of value 4k + j (k < 4) or 16 + 4(k-4) + j
//          (k >= 4) of group g, i.e. of lane g, byte j of transposed vector k.
//
// K-type value order inside a 256-value super-block, as "groups" of 32 values
// (g = 0..7; the scalar and SIMD code both walk this order):
//   Q2_K/Q3_K: group g = 4*h + s (half h, shift s): value l (0..31) is
//              (qs[32h + l] >> 2s) & 3; sub-block scales[2g], scales[2g+1] cover
//              values 0..15 and 16..31. Q3_K's high bit is (hmask[l] >> g) & 1 and a
//              clear bit subtracts 4.
//   Q4_K/Q5_K: group g: chunk c = g/2 of 32 bytes qs[32c..]; even g takes the low
//              nibbles, odd g the high ones; Q5_K's fifth bit is (qh[l] >> g) & 1.
//              Scale and min g are 6-bit values packed in scales[12] (see
//              k4_scale_min).
//   Q6_K:      half h = g/4, k = g%4: low 4 bits from ql[64h + 32*(k&1) + l], the
//              low nibble for k < 2 and the high one otherwise; high 2 bits
//              (qh[32h + l] >> 2k) & 3; value - 32; sub-scales scales[2g], [2g+1].
//   IQ4_XS:    group g: qs[16g..16g+15] as an IQ4_NL block, 6-bit scale minus 32.
//   Q4_K_R, Q5_K_R, Q6_K_R: their file type's groups and values, at the places given above.
#pragma once

#include <cstdint>
#include <cstring>

namespace gb::kernels::quant {

inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// MXFP4's codes: the E2M1 values {0, 0.5, 1, 1.5, 2, 3, 4, 6} and their
// negatives, doubled so they are integers (code 8 is -0, stored as 0).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// MXFP4's block scale 2^(e - 128) from its E8M0 byte, exactly (no libm): e >= 2
// is the normal float with biased exponent e - 1; e = 0 and 1 are subnormals.
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t read_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Q4_K/Q5_K: the 6-bit scale and min of group j (0..7) from the 12 packed bytes.
// Groups 0..3: low 6 bits of bytes j and j+4. Groups 4..7: low nibble / high
// nibble of byte j+4, with the top two bits from bytes j-4 and j.
inline void k4_scale_min(int j, const uint8_t* s, uint8_t& scale, uint8_t& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = static_cast<uint8_t>((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    min = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// Q4_K_R: the byte of codes[] holding value l (0..31) of group g, and its shift.
inline int q4kr_code_byte(int g, int l) { return 32 * ((l % 16) / 4) + 4 * g + l % 4; }
inline int q4kr_code_shift(int l) { return l < 16 ? 0 : 4; }
// Q5_K_R: the bit of hi byte 4g + l % 4 holding the fifth bit of value l of group g.
inline int q5kr_high_bit(int l) { return l < 16 ? l / 4 : 4 + (l - 16) / 4; }
// Q6_K_R: the byte of hi[] (after lo's 128) holding the top 2 bits of value l of group g, and their shift.
inline int q6kr_high_byte(int g, int l) { return 32 * (l / 16) + 4 * g + l % 4; }
inline int q6kr_high_shift(int l) { return 2 * ((l % 16) / 4); }
// Q6_K: the 6-bit code (0..63, value + 32) of value l of group g.
inline int q6k_code(const uint8_t* b, int g, int l) {
  const int h = g / 4, k = g % 4;
  const uint8_t lo = b[64 * h + 32 * (k & 1) + l];
  return (k < 2 ? (lo & 0xF) : (lo >> 4)) | (((b[128 + 32 * h + l] >> (2 * k)) & 3) << 4);
}

// Q3_K: the 6-bit scale of sub-block j (0..15), still offset by 32. Low 4 bits
// from scales[j] (j < 8) or scales[j-8] >> 4; high 2 bits from byte 8 + j%4.
inline int q3k_scale(int j, const uint8_t* s) {
  const int low = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return low | (high << 4);
}

// IQ4_XS: the 6-bit scale of group j (0..7), still offset by 32.
inline int iq4xs_scale(int j, uint16_t scales_h, const uint8_t* scales_l) {
  return ((scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((scales_h >> (2 * j)) & 3) << 4);
}

}  // namespace gb::kernels::quant
