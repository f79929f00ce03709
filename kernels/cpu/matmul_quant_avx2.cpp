// AVX2/FMA/F16C kernels for quantized weights times 8-bit activations
// (ActBlockQ8). Compiled with -mavx2 -mfma -mf16c; entered only after the cpuid
// check in matmul_quant.cpp. Like matmul_avx2.cpp it includes no standard
// library headers and keeps every helper in an anonymous namespace, so no
// inline function compiled here with AVX2 encodings can be picked by the linker
// for code that runs on CPUs without AVX2 (that is also why the few block
// helpers of quant_blocks.h are restated here).
//
// One kernel serves every type. It walks a weight row in units of 256 values
// = 8 groups of 32 (a K-type or IQ4_XS super-block, or 8 consecutive blocks of
// a 32-value type such as Q4_0), and a type only says
//   head(b, n)  the unit's scales and offsets as 8-lane vectors (SuperHead:
//               group scale d, offsets m0/m1 per value of each half, int16
//               sub-scales of 16-value sub-blocks), decoded once per unit;
//               n < 8 only for the last unit of a row of 32-value blocks
//   q(b, g)     the 32 integer weights of group g
// and computes per group, row and token
//   d * a.d * sum_i sc(i) q_i a_i  +  a.d * (m0 * a.sum[0] + m1 * a.sum[1])
// with maddubs/madd integer products, one convert and one FMA; offsets are
// one vector FMA per unit. Every (row, token) result goes through the same
// sequence of operations whatever the tile shape, so one token decoded alone
// equals the same token inside a prefill batch bit for bit (the activation
// quantization that follows each matmul would otherwise turn last-bit
// differences into different int8 values). Within a unit, groups are summed
// in pairs before they reach the accumulator, which shortens the dependency
// chain that limits decode. Decode walks one row at a time so the weights
// stream in address order; prefill tiles decode a unit once for 4 tokens.
#include <immintrin.h>

#include <cstdint>

#include "cpu/weight_type.h"

namespace gb::kernels::avx2 {

namespace {

constexpr int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

inline float f16(const uint8_t* p) { return _cvtsh_ss(static_cast<unsigned short>(p[0] | (p[1] << 8))); }
inline uint32_t u32(const uint8_t* p) {
  uint32_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline __m256i ones16() { return _mm256_set1_epi16(1); }
inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
// 16 bytes -> 32 nibbles: low nibbles are values 0..15, high nibbles 16..31.
inline __m256i nibbles16(const uint8_t* p) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
}
// Byte i = 0xFF where bit i of x is set.
inline __m256i bits_to_bytes(uint32_t x) {
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                        3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x)), shuf);
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}
inline __m256i iq4_lookup(__m256i idx) {
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nl)));
  return _mm256_shuffle_epi8(table, idx);
}
// Bits `shift`.. of every byte of v, masked with `mask`.
inline __m256i field(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(static_cast<char>(mask)));
}
// ---- 32-value block types ----------------------------------------------------
// kBytes per block, f16 d at byte 0; kMinAt: byte of the f16 offset m (Q4_1,
// Q5_1) or -1; kOffset: the constant the codes are stored above (Q4_0's 8,
// Q5_0's 16), applied like an offset m = -kOffset * d so the codes multiply
// unsigned; q(b): the 32 codes.

struct Q4_0 {
  static constexpr int kBytes = 18, kMinAt = -1, kOffset = 8;
  static constexpr bool kSigned = false;
  static __m256i q(const uint8_t* b) { return nibbles16(b + 2); }
};
struct Q4_1 {
  static constexpr int kBytes = 20, kMinAt = 2, kOffset = 0;
  static constexpr bool kSigned = false;
  static __m256i q(const uint8_t* b) { return nibbles16(b + 4); }
};
struct Q5_0 {
  static constexpr int kBytes = 22, kMinAt = -1, kOffset = 16;
  static constexpr bool kSigned = false;
  static __m256i q(const uint8_t* b) {
    return _mm256_or_si256(nibbles16(b + 6), _mm256_and_si256(bits_to_bytes(u32(b + 2)), _mm256_set1_epi8(0x10)));
  }
};
struct Q5_1 {
  static constexpr int kBytes = 24, kMinAt = 2, kOffset = 0;
  static constexpr bool kSigned = false;
  static __m256i q(const uint8_t* b) {
    return _mm256_or_si256(nibbles16(b + 8), _mm256_and_si256(bits_to_bytes(u32(b + 4)), _mm256_set1_epi8(0x10)));
  }
};
struct Q8_0 {
  static constexpr int kBytes = 34, kMinAt = -1, kOffset = 0;
  static constexpr bool kSigned = true;
  static __m256i q(const uint8_t* b) { return load256(b + 2); }
};
struct IQ4_NL {
  static constexpr int kBytes = 18, kMinAt = -1, kOffset = 0;
  static constexpr bool kSigned = true;
  static __m256i q(const uint8_t* b) { return iq4_lookup(nibbles16(b + 2)); }
};

// ---- super-block types (256 values = 8 groups of 32) ------------------------
// head() decodes a unit's scales with vector instructions into
//   d       8 lanes: the float scale of each group's integer sum
//   m0, m1  8 lanes: offsets per value of values 0..15 / 16..31 of each group
//           (K-type -dmin * min; zero vectors where the type has none)
//   sc      16 int16 sub-scales (values 0..15 and 16..31 of group g are lanes
//           2g and 2g+1), for the types with 16-value sub-blocks
// and q(b, g) the 32 integer weights of group g.

struct SuperHead {
  __m256 d, m0, m1;
  __m256i sc;
};

// 8 unsigned bytes (little-endian u64) to 8 float lanes.
inline __m256 u8x8_to_ps(unsigned long long v) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(v))));
}
// 16 signed bytes to 16 int16 lanes.
inline __m256i i8x16_to_i16(__m128i v) { return _mm256_cvtepi8_epi16(v); }

struct IQ4_XS {
  static constexpr int kBytes = 136;
  static constexpr bool kSigned = true, kHasMin = false, kSubScales = false;
  static SuperHead head(const uint8_t* b, int) {
    // Group j: low 4 bits = nibble j of scales_l (bytes 4..7), high 2 bits =
    // bits 2j..2j+1 of scales_h (bytes 2..3); minus 32.
    const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(u32(b + 4))),
                                                          _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                        _mm256_set1_epi32(0xF));
    const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b[2] | (b[3] << 8)),
                                                          _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                        _mm256_set1_epi32(3));
    const __m256i sc = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
    const __m256 z = _mm256_setzero_ps();
    return {_mm256_mul_ps(_mm256_set1_ps(f16(b)), _mm256_cvtepi32_ps(sc)), z, z, _mm256_setzero_si256()};
  }
  static __m256i q(const uint8_t* b, int g) { return iq4_lookup(nibbles16(b + 8 + 16 * g)); }
};
struct Q2_K {
  static constexpr int kBytes = 84;
  static constexpr bool kSigned = false, kHasMin = true, kSubScales = true;
  static SuperHead head(const uint8_t* b, int) {
    // scales[16]: low nibble = sub-block scale, high nibble = sub-block min.
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i mins = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
    // Even sub-blocks (values 0..15 of each group) and odd ones, as 8 bytes each.
    const __m128i split = _mm_shuffle_epi8(mins, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
    const __m256 dmin = _mm256_set1_ps(-f16(b + 82));
    const __m256 m0 = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(split)));
    const __m256 m1 = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(split, split))));
    return {_mm256_set1_ps(f16(b + 80)), m0, m1, i8x16_to_i16(_mm_and_si128(raw, mask))};
  }
  static __m256i q(const uint8_t* b, int g) { return field(load256(b + 16 + 32 * (g / 4)), 2 * (g % 4), 3); }
};
struct Q3_K {
  static constexpr int kBytes = 110;
  static constexpr bool kSigned = true, kHasMin = false, kSubScales = true;
  static SuperHead head(const uint8_t* b, int) {
    // 16 sub-scales: low 4 bits from bytes 96..103 (low nibbles for 0..7, high
    // for 8..15); high 2 bits of sub-block j from byte 104 + j%4 at bit 2*(j/4).
    const __m128i low8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 96));
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(low8, mask), _mm_and_si128(_mm_srli_epi16(low8, 4), mask));
    const __m128i hbits = _mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(u32(b + 104))), _mm_setr_epi32(0, 2, 4, 6));
    const __m128i high = _mm_slli_epi16(_mm_and_si128(hbits, _mm_set1_epi8(3)), 4);
    const __m128i sc = _mm_sub_epi8(_mm_or_si128(low, high), _mm_set1_epi8(32));
    const __m256 z = _mm256_setzero_ps();
    return {_mm256_set1_ps(f16(b + 108)), z, z, i8x16_to_i16(sc)};
  }
  static __m256i q(const uint8_t* b, int g) {
    const __m256i low = field(load256(b + 32 + 32 * (g / 4)), 2 * (g % 4), 3);
    const __m256i high = _mm256_slli_epi16(field(load256(b), g, 1), 2);
    return _mm256_sub_epi8(_mm256_or_si256(low, high), _mm256_set1_epi8(4));
  }
};
template <bool kFifthBit>
struct Q45_K {
  static constexpr int kBytes = kFifthBit ? 176 : 144;
  static constexpr bool kSigned = false, kHasMin = true, kSubScales = false;
  static SuperHead head(const uint8_t* b, int) {
    // The 12 packed bytes as three words a (bytes 4..7), m (8..11), c (12..15):
    // scales 0..3 = a & 63, mins 0..3 = m & 63 (per byte); scales 4..7 = low
    // nibbles of c with a's top two bits above them, mins 4..7 = high nibbles
    // of c with m's top two bits.
    const uint32_t a = u32(b + 4), m = u32(b + 8), c = u32(b + 12);
    const uint32_t sc_lo = a & 0x3F3F3F3Fu, sc_hi = (c & 0x0F0F0F0Fu) | ((a >> 2) & 0x30303030u);
    const uint32_t mn_lo = m & 0x3F3F3F3Fu, mn_hi = ((c >> 4) & 0x0F0F0F0Fu) | ((m >> 2) & 0x30303030u);
    const __m256 sc = u8x8_to_ps(sc_lo | (static_cast<unsigned long long>(sc_hi) << 32));
    const __m256 mn = u8x8_to_ps(mn_lo | (static_cast<unsigned long long>(mn_hi) << 32));
    const __m256 mins = _mm256_mul_ps(_mm256_set1_ps(-f16(b + 2)), mn);
    return {_mm256_mul_ps(_mm256_set1_ps(f16(b)), sc), mins, mins, _mm256_setzero_si256()};
  }
  static __m256i q(const uint8_t* b, int g) {
    __m256i v = field(load256(b + (kFifthBit ? 48 : 16) + 32 * (g / 2)), 4 * (g % 2), 0xF);
    if constexpr (kFifthBit) v = _mm256_or_si256(v, _mm256_slli_epi16(field(load256(b + 16), g, 1), 4));
    return v;
  }
};
struct Q6_K {
  static constexpr int kBytes = 210;
  static constexpr bool kSigned = true, kHasMin = false, kSubScales = true;
  static SuperHead head(const uint8_t* b, int) {
    const __m256 z = _mm256_setzero_ps();
    return {_mm256_set1_ps(f16(b + 208)), z, z,
            i8x16_to_i16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)))};
  }
  static __m256i q(const uint8_t* b, int g) {
    const int half = g / 4, k = g % 4;
    const __m256i low = field(load256(b + 64 * half + 32 * (k & 1)), k < 2 ? 0 : 4, 0xF);
    const __m256i high = _mm256_slli_epi16(field(load256(b + 128 + 32 * half), 2 * k, 3), 4);
    return _mm256_sub_epi8(_mm256_or_si256(low, high), _mm256_set1_epi8(32));
  }
};

// 8 blocks of a 32-value type as one unit; n < 8 for a row's last, partial unit
// (lanes n..7 are zero and their bytes are never read).
template <class B>
struct Unit8 {
  static constexpr int kBytes = 8 * B::kBytes;
  static constexpr bool kSigned = B::kSigned, kHasMin = B::kMinAt >= 0 || B::kOffset != 0, kSubScales = false;
  static unsigned short h16(const uint8_t* p) { return static_cast<unsigned short>(p[0] | (p[1] << 8)); }
  static __m256 f16_lanes(const uint8_t* b, int at, int n) {
    if (n == 8) {
      const int k = B::kBytes;
      return _mm256_cvtph_ps(_mm_setr_epi16(static_cast<short>(h16(b + at)), static_cast<short>(h16(b + k + at)),
                                            static_cast<short>(h16(b + 2 * k + at)), static_cast<short>(h16(b + 3 * k + at)),
                                            static_cast<short>(h16(b + 4 * k + at)), static_cast<short>(h16(b + 5 * k + at)),
                                            static_cast<short>(h16(b + 6 * k + at)), static_cast<short>(h16(b + 7 * k + at))));
    }
    alignas(16) unsigned short h[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < n; ++i) h[i] = static_cast<unsigned short>(b[i * B::kBytes + at] | (b[i * B::kBytes + at + 1] << 8));
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
  }
  static SuperHead head(const uint8_t* b, int n) {
    const __m256 d = f16_lanes(b, 0, n);
    __m256 m = _mm256_setzero_ps();
    if constexpr (B::kMinAt >= 0) m = f16_lanes(b, B::kMinAt, n);
    if constexpr (B::kOffset != 0) m = _mm256_mul_ps(d, _mm256_set1_ps(-static_cast<float>(B::kOffset)));
    return {d, m, m, _mm256_setzero_si256()};
  }
  static __m256i q(const uint8_t* b, int g) { return B::q(b + g * B::kBytes); }
};

// ---- the kernel -----------------------------------------------------------

inline float hsum(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// Integer products of 32 weights with 32 activations, summed in pairs to int16.
template <bool kSigned>
inline __m256i products(__m256i q, __m256i a) {
  if constexpr (kSigned) return _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q));
  else return _mm256_maddubs_epi16(q, a);
}

// Broadcast lane g (0..7) of v.
inline __m256 lane(__m256 v, int g) { return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(g)); }
// Sub-scales of group g as madd multipliers: lanes 0-7 = sc[2g], lanes 8-15 = sc[2g+1].
inline __m256i group_scales(__m256i sc16, int g) {
  const __m256i pair = _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(g));
  return _mm256_shuffle_epi8(pair, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2,
                                                    3, 2, 3, 2, 3, 2, 3, 2, 3));
}

// What a unit's n activation blocks contribute besides their bytes: scales d
// and, for the offset terms, d * sum of values 0..15 / 16..31 (zero lanes
// from n on).
struct ActHead {
  __m256 d, s0, s1;
};
inline ActHead act_head(const ActBlockQ8* a, int n) {
  __m256 d, s0, s1;
  if (n == 8) {
    d = _mm256_setr_ps(a[0].d, a[1].d, a[2].d, a[3].d, a[4].d, a[5].d, a[6].d, a[7].d);
    s0 = _mm256_cvtepi32_ps(_mm256_setr_epi32(a[0].sum[0], a[1].sum[0], a[2].sum[0], a[3].sum[0], a[4].sum[0],
                                              a[5].sum[0], a[6].sum[0], a[7].sum[0]));
    s1 = _mm256_cvtepi32_ps(_mm256_setr_epi32(a[0].sum[1], a[1].sum[1], a[2].sum[1], a[3].sum[1], a[4].sum[1],
                                              a[5].sum[1], a[6].sum[1], a[7].sum[1]));
  } else {
    alignas(32) float dv[8] = {0, 0, 0, 0, 0, 0, 0, 0}, v0[8] = {0, 0, 0, 0, 0, 0, 0, 0}, v1[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < n; ++i) {
      dv[i] = a[i].d;
      v0[i] = static_cast<float>(a[i].sum[0]);
      v1[i] = static_cast<float>(a[i].sum[1]);
    }
    d = _mm256_load_ps(dv);
    s0 = _mm256_load_ps(v0);
    s1 = _mm256_load_ps(v1);
  }
  return {d, _mm256_mul_ps(d, s0), _mm256_mul_ps(d, s1)};
}

// Where a matmul's units are: `units` per row, the last with `last_n` groups.
struct Units {
  int64_t count;
  int last_n;
  int n(int64_t u) const { return u + 1 == count ? last_n : 8; }
};

// One unit of rows `rows` times tokens t0..t0+T-1 into acc. kFull: all 8
// groups present (the compiler unrolls them); otherwise the first n.
template <class Ty, int R, int T, bool kFull>
inline void unit_step(__m256 (&acc)[R][T], const uint8_t* const (&rows)[R], int64_t u, int n, const ActBlockQ8* x,
                      int64_t act_blocks, const ActHead* pre, int64_t t0) {
  if constexpr (kFull) n = 8;
  SuperHead h[R];
  for (int r = 0; r < R; ++r) h[r] = Ty::head(rows[r] + u * Ty::kBytes, n);
  __m256 da[R][T], pair[R][T];
  for (int t = 0; t < T; ++t) {
    const ActHead a = pre != nullptr ? pre[u] : act_head(x + (t0 + t) * act_blocks + u * 8, n);
    for (int r = 0; r < R; ++r) {
      da[r][t] = _mm256_mul_ps(h[r].d, a.d);
      if constexpr (Ty::kHasMin) acc[r][t] = _mm256_fmadd_ps(h[r].m1, a.s1, _mm256_fmadd_ps(h[r].m0, a.s0, acc[r][t]));
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < 8; ++g) {
    if (!kFull && g >= n) break;
    __m256i q[R], sc[R];
    for (int r = 0; r < R; ++r) {
      q[r] = Ty::q(rows[r] + u * Ty::kBytes, g);
      sc[r] = Ty::kSubScales ? group_scales(h[r].sc, g) : ones16();
    }
    for (int t = 0; t < T; ++t) {
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[(t0 + t) * act_blocks + u * 8 + g].qs));
      for (int r = 0; r < R; ++r) {
        const __m256 c = _mm256_cvtepi32_ps(_mm256_madd_epi16(products<Ty::kSigned>(q[r], av), sc[r]));
        // Groups 2k and 2k+1 meet first, then the accumulator.
        if (g % 2 == 0) {
          pair[r][t] = _mm256_mul_ps(c, lane(da[r][t], g));
          if (g + 1 >= n) acc[r][t] = _mm256_add_ps(acc[r][t], pair[r][t]);
        } else {
          acc[r][t] = _mm256_add_ps(acc[r][t], _mm256_fmadd_ps(c, lane(da[r][t], g), pair[r][t]));
        }
      }
    }
  }
}

// Rows r0..r0+R-1 times tokens t0..t0+T-1. `pre`, when given, holds
// act_head() of every unit of token t0 (T = 1).
template <class Ty, int R, int T>
inline void tile(float* y, int64_t ldy, const ActBlockQ8* x, int64_t act_blocks, const ActHead* pre,
                 const uint8_t* w, int64_t row_stride, Units units, int64_t r0, int64_t t0) {
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  const uint8_t* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = w + (r0 + r) * row_stride;
  const int64_t full = units.last_n == 8 ? units.count : units.count - 1;
  for (int64_t u = 0; u < full; ++u) unit_step<Ty, R, T, true>(acc, rows, u, 8, x, act_blocks, pre, t0);
  if (full < units.count) unit_step<Ty, R, T, false>(acc, rows, full, units.last_n, x, act_blocks, pre, t0);
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) y[(t0 + t) * ldy + r0 + r] = hsum(acc[r][t]);
}

template <class Ty>
void matmul_units(float* y, int64_t ldy, const ActBlockQ8* x, const void* w, int64_t row_stride_bytes,
                  int64_t num_tokens, int64_t cols, int64_t row_begin, int64_t row_end) {
  const int64_t act_blocks = cols / 32;
  const Units units{(act_blocks + 7) / 8, static_cast<int>(act_blocks - 8 * ((act_blocks + 7) / 8 - 1))};
  const auto* wb = static_cast<const uint8_t*>(w);
  constexpr int64_t kMaxPre = 256;  // rows of up to 65536 values
  if (num_tokens == 1 && units.count <= kMaxPre) {
    // Decode: one row after another, so the weights stream strictly in address
    // order (interleaving rows halved the rate), with the activation heads of
    // every unit made once.
    ActHead pre[kMaxPre];
    for (int64_t u = 0; u < units.count; ++u) pre[u] = act_head(x + u * 8, units.n(u));
    for (int64_t r = row_begin; r < row_end; ++r) tile<Ty, 1, 1>(y, ldy, x, act_blocks, pre, wb, row_stride_bytes, units, r, 0);
    return;
  }
  // Prefill: panels of rows small enough to stay in L1/L2 while all token tiles pass.
  constexpr int64_t kPanel = 16;
  for (int64_t p = row_begin; p < row_end; p += kPanel) {
    const int64_t p_end = p + kPanel < row_end ? p + kPanel : row_end;
    int64_t t = 0;
    for (; t + 4 <= num_tokens; t += 4)
      for (int64_t r = p; r < p_end; ++r) tile<Ty, 1, 4>(y, ldy, x, act_blocks, nullptr, wb, row_stride_bytes, units, r, t);
    for (; t < num_tokens; ++t)
      for (int64_t r = p; r < p_end; ++r) tile<Ty, 1, 1>(y, ldy, x, act_blocks, nullptr, wb, row_stride_bytes, units, r, t);
  }
}
}  // namespace

using QuantMatmulFn = void (*)(float* y, int64_t ldy, const ActBlockQ8* x, const void* w, int64_t row_stride_bytes,
                               int64_t num_tokens, int64_t cols, int64_t row_begin, int64_t row_end);

// The AVX2 kernel of each quantized type (nullptr: none, use the reference).
QuantMatmulFn quant_matmul_kernel(WeightType t) {
  switch (t) {
    case WeightType::Q4_0: return &matmul_units<Unit8<Q4_0>>;
    case WeightType::Q4_1: return &matmul_units<Unit8<Q4_1>>;
    case WeightType::Q5_0: return &matmul_units<Unit8<Q5_0>>;
    case WeightType::Q5_1: return &matmul_units<Unit8<Q5_1>>;
    case WeightType::Q8_0: return &matmul_units<Unit8<Q8_0>>;
    case WeightType::Q2_K: return &matmul_units<Q2_K>;
    case WeightType::Q3_K: return &matmul_units<Q3_K>;
    case WeightType::Q4_K: return &matmul_units<Q45_K<false>>;
    case WeightType::Q5_K: return &matmul_units<Q45_K<true>>;
    case WeightType::Q6_K: return &matmul_units<Q6_K>;
    case WeightType::IQ4_NL: return &matmul_units<Unit8<IQ4_NL>>;
    case WeightType::IQ4_XS: return &matmul_units<IQ4_XS>;
    default: return nullptr;
  }
}

// Activations to ActBlockQ8: max |x| per 32 values, q = round-to-nearest-even(x * 127 / max).
void quantize_activations(const float* x, int64_t cols, int64_t token_begin, int64_t token_end, ActBlockQ8* out) {
  const int64_t blocks = cols / 32;
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (int64_t t = token_begin; t < token_end; ++t) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* v = x + t * cols + b * 32;
      __m256 xs[4];
      __m256 amax = _mm256_setzero_ps();
      for (int i = 0; i < 4; ++i) {
        xs[i] = _mm256_loadu_ps(v + 8 * i);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, xs[i]));
      }
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
      const float maxv = _mm_cvtss_f32(m4);
      ActBlockQ8& o = out[t * blocks + b];
      o.d = maxv / 127.0f;
      const __m256 id = _mm256_set1_ps(o.d != 0.0f ? 127.0f / maxv : 0.0f);
      __m256i q32[4];
      for (int i = 0; i < 4; ++i)
        q32[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(xs[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      // Pack 32 int32 to int8 (packs work per 128-bit lane, so fix the order after).
      const __m256i p01 = _mm256_packs_epi32(q32[0], q32[1]);
      const __m256i p23 = _mm256_packs_epi32(q32[2], q32[3]);
      __m256i q8 = _mm256_packs_epi16(p01, p23);
      q8 = _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.qs), q8);
      const __m256i s16 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q8), _mm256_set1_epi16(1));
      const __m128i lo = _mm256_castsi256_si128(s16), hi = _mm256_extracti128_si256(s16, 1);
      o.sum[0] = static_cast<int16_t>(_mm_cvtsi128_si32(_mm_hadd_epi32(_mm_hadd_epi32(lo, lo), lo)));
      o.sum[1] = static_cast<int16_t>(_mm_cvtsi128_si32(_mm_hadd_epi32(_mm_hadd_epi32(hi, hi), hi)));
    }
  }
}

}  // namespace gb::kernels::avx2
