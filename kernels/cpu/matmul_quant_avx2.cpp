// AVX2/FMA/F16C kernels for quantized weights times 8-bit activations
// (ActBlockQ8). Compiled with -mavx2 -mfma -mf16c; entered only after the cpuid
// check in matmul_quant.cpp. Like matmul_avx2.cpp it includes no standard
// library headers and keeps every helper in an anonymous namespace, so no
// inline function compiled here with AVX2 encodings can be picked by the linker
// for code that runs on CPUs without AVX2 (that is also why the few block
// helpers of quant_blocks.h are restated here).
//
// One generic kernel serves every type. A type only says how to decode its
// blocks into groups of 32 weights (see quant_blocks.h for the order):
//   q    32 int8 weights (signed, or unsigned 0..63 when kSigned is false)
//   sc   int16 multipliers: lanes 0-7 for values 0..15, lanes 8-15 for 16..31
//        (the 16-value sub-block scales of Q2_K/Q3_K/Q6_K; 1 otherwise)
//   d    float scale of the group
//   m0,m1 float offsets added per value in each half (Q4_1/Q5_1 m; K-type -dmin*min)
// and the kernel computes, per group and token,
//   d * a.d * sum_i sc(i) q_i a_i  +  a.d * (m0 * a.sum[0] + m1 * a.sum[1])
// with maddubs/madd integer products and one FMA per group. A tile decodes a
// weight block once and multiplies it with T tokens (T = 1 for decode, 4 for
// prefill), so prefill pays the decoding once per 4 tokens.
#include <immintrin.h>

#include <cstdint>

#include "cpu/weight_type.h"

namespace gb::kernels::avx2 {

namespace {

struct Group {
  __m256i q;
  __m256i sc;
  float d;
  float m0, m1;
};

constexpr int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

inline float f16(const uint8_t* p) { return _cvtsh_ss(static_cast<unsigned short>(p[0] | (p[1] << 8))); }
inline uint32_t u32(const uint8_t* p) {
  uint32_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline __m256i ones16() { return _mm256_set1_epi16(1); }
inline __m256i scales16(int a, int b) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(b)), _mm_set1_epi16(static_cast<short>(a)));
}
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
void k4_scale_min(int j, const uint8_t* s, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}
int q3k_scale(int j, const uint8_t* s) {
  return ((j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4)) | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

// ---- one decoder per type -------------------------------------------------
// head() unpacks what a block's groups share (f16 scales, 6-bit sub-scales);
// group() decodes group j. Splitting them keeps only one group per row live
// in registers (decoding all 8 groups of a K-type block first spilled them).

struct NoHead {};

struct Q4_0 {
  static constexpr int kGroups = 1, kBytes = 18;
  static constexpr bool kSigned = true, kHasMin = false;
  using Head = NoHead;
  static Head head(const uint8_t*) { return {}; }
  static Group group(const uint8_t* b, const Head&, int) {
    return {_mm256_sub_epi8(nibbles16(b + 2), _mm256_set1_epi8(8)), ones16(), f16(b), 0, 0};
  }
};
struct Q4_1 {
  static constexpr int kGroups = 1, kBytes = 20;
  static constexpr bool kSigned = false, kHasMin = true;
  using Head = NoHead;
  static Head head(const uint8_t*) { return {}; }
  static Group group(const uint8_t* b, const Head&, int) {
    const float m = f16(b + 2);
    return {nibbles16(b + 4), ones16(), f16(b), m, m};
  }
};
struct Q5_0 {
  static constexpr int kGroups = 1, kBytes = 22;
  static constexpr bool kSigned = true, kHasMin = false;
  using Head = NoHead;
  static Head head(const uint8_t*) { return {}; }
  static Group group(const uint8_t* b, const Head&, int) {
    const __m256i hi = _mm256_and_si256(bits_to_bytes(u32(b + 2)), _mm256_set1_epi8(0x10));
    return {_mm256_sub_epi8(_mm256_or_si256(nibbles16(b + 6), hi), _mm256_set1_epi8(16)), ones16(), f16(b), 0, 0};
  }
};
struct Q5_1 {
  static constexpr int kGroups = 1, kBytes = 24;
  static constexpr bool kSigned = false, kHasMin = true;
  using Head = NoHead;
  static Head head(const uint8_t*) { return {}; }
  static Group group(const uint8_t* b, const Head&, int) {
    const __m256i hi = _mm256_and_si256(bits_to_bytes(u32(b + 4)), _mm256_set1_epi8(0x10));
    const float m = f16(b + 2);
    return {_mm256_or_si256(nibbles16(b + 8), hi), ones16(), f16(b), m, m};
  }
};
struct Q8_0 {
  static constexpr int kGroups = 1, kBytes = 34;
  static constexpr bool kSigned = true, kHasMin = false;
  using Head = NoHead;
  static Head head(const uint8_t*) { return {}; }
  static Group group(const uint8_t* b, const Head&, int) { return {load256(b + 2), ones16(), f16(b), 0, 0}; }
};
struct IQ4_NL {
  static constexpr int kGroups = 1, kBytes = 18;
  static constexpr bool kSigned = true, kHasMin = false;
  using Head = NoHead;
  static Head head(const uint8_t*) { return {}; }
  static Group group(const uint8_t* b, const Head&, int) {
    return {iq4_lookup(nibbles16(b + 2)), ones16(), f16(b), 0, 0};
  }
};
struct IQ4_XS {
  static constexpr int kGroups = 8, kBytes = 136;
  static constexpr bool kSigned = true, kHasMin = false;
  struct Head { float d[8]; };
  static Head head(const uint8_t* b) {
    Head h;
    const float d = f16(b);
    const int scales_h = b[2] | (b[3] << 8);
    for (int j = 0; j < 8; ++j)
      h.d[j] = d * static_cast<float>((((b[4 + j / 2] >> (4 * (j % 2))) & 0xF) | (((scales_h >> (2 * j)) & 3) << 4)) - 32);
    return h;
  }
  static Group group(const uint8_t* b, const Head& h, int j) {
    return {iq4_lookup(nibbles16(b + 8 + 16 * j)), ones16(), h.d[j], 0, 0};
  }
};
struct Q2_K {
  static constexpr int kGroups = 8, kBytes = 84;
  static constexpr bool kSigned = false, kHasMin = true;
  struct Head { float d, dmin; };
  static Head head(const uint8_t* b) { return {f16(b + 80), f16(b + 82)}; }
  static Group group(const uint8_t* b, const Head& h, int j) {
    const uint8_t s0 = b[2 * j], s1 = b[2 * j + 1];
    return {field(load256(b + 16 + 32 * (j / 4)), 2 * (j % 4), 3), scales16(s0 & 0xF, s1 & 0xF), h.d,
            -h.dmin * static_cast<float>(s0 >> 4), -h.dmin * static_cast<float>(s1 >> 4)};
  }
};
struct Q3_K {
  static constexpr int kGroups = 8, kBytes = 110;
  static constexpr bool kSigned = true, kHasMin = false;
  struct Head { float d; int8_t sc[16]; };
  static Head head(const uint8_t* b) {
    Head h;
    h.d = f16(b + 108);
    for (int j = 0; j < 16; ++j) h.sc[j] = static_cast<int8_t>(q3k_scale(j, b + 96));
    return h;
  }
  static Group group(const uint8_t* b, const Head& h, int j) {
    const __m256i low = field(load256(b + 32 + 32 * (j / 4)), 2 * (j % 4), 3);
    const __m256i high = _mm256_slli_epi16(field(load256(b), j, 1), 2);
    const __m256i q = _mm256_sub_epi8(_mm256_or_si256(low, high), _mm256_set1_epi8(4));
    return {q, scales16(h.sc[2 * j], h.sc[2 * j + 1]), h.d, 0, 0};
  }
};
template <bool kFifthBit>
struct Q45_K {
  static constexpr int kGroups = 8, kBytes = kFifthBit ? 176 : 144;
  static constexpr bool kSigned = false, kHasMin = true;
  struct Head { float d[8], m[8]; };
  static Head head(const uint8_t* b) {
    Head h;
    const float d = f16(b), dmin = f16(b + 2);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      k4_scale_min(j, b + 4, sc, m);
      h.d[j] = d * static_cast<float>(sc);
      h.m[j] = -dmin * static_cast<float>(m);
    }
    return h;
  }
  static Group group(const uint8_t* b, const Head& h, int j) {
    __m256i q = field(load256(b + (kFifthBit ? 48 : 16) + 32 * (j / 2)), 4 * (j % 2), 0xF);
    if constexpr (kFifthBit) q = _mm256_or_si256(q, _mm256_slli_epi16(field(load256(b + 16), j, 1), 4));
    return {q, ones16(), h.d[j], h.m[j], h.m[j]};
  }
};
struct Q6_K {
  static constexpr int kGroups = 8, kBytes = 210;
  static constexpr bool kSigned = true, kHasMin = false;
  struct Head { float d; };
  static Head head(const uint8_t* b) { return {f16(b + 208)}; }
  static Group group(const uint8_t* b, const Head& h, int j) {
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    const int half = j / 4, k = j % 4;
    const __m256i low = field(load256(b + 64 * half + 32 * (k & 1)), k < 2 ? 0 : 4, 0xF);
    const __m256i high = _mm256_slli_epi16(field(load256(b + 128 + 32 * half), 2 * k, 3), 4);
    const __m256i q = _mm256_sub_epi8(_mm256_or_si256(low, high), _mm256_set1_epi8(32));
    return {q, scales16(sc[2 * j], sc[2 * j + 1]), h.d, 0, 0};
  }
};

// ---- the generic kernel ---------------------------------------------------

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

// Rows r0..r0+R-1 times tokens t0..t0+T-1: R x T independent accumulators, so
// the FMA chains overlap, and each activation vector is loaded once per R rows.
template <class Ty, int R, int T>
inline void dot_tile(float* y, int64_t ldy, const ActBlockQ8* x, int64_t act_blocks, const uint8_t* w,
                     int64_t row_stride, int64_t num_blocks, int64_t r0, int64_t t0) {
  __m256 acc[R][T];
  float min_acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      acc[r][t] = _mm256_setzero_ps();
      min_acc[r][t] = 0.0f;
    }
  const uint8_t* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = w + (r0 + r) * row_stride;
  for (int64_t blk = 0; blk < num_blocks; ++blk) {
    typename Ty::Head head[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      // Decode reads each weight row once: fetch the same columns two blocks ahead.
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + (blk + 2) * Ty::kBytes), _MM_HINT_T0);
      head[r] = Ty::head(rows[r] + blk * Ty::kBytes);
    }
    for (int k = 0; k < Ty::kGroups; ++k) {
      Group g[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) g[r] = Ty::group(rows[r] + blk * Ty::kBytes, head[r], k);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const ActBlockQ8& a = x[(t0 + t) * act_blocks + blk * Ty::kGroups + k];
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m256i s32 = _mm256_madd_epi16(products<Ty::kSigned>(g[r].q, av), g[r].sc);
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), _mm256_set1_ps(g[r].d * a.d), acc[r][t]);
          if constexpr (Ty::kHasMin)
            min_acc[r][t] += a.d * (g[r].m0 * static_cast<float>(a.sum[0]) + g[r].m1 * static_cast<float>(a.sum[1]));
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) y[(t0 + t) * ldy + r0 + r] = hsum(acc[r][t]) + min_acc[r][t];
}

template <class Ty, int T>
inline void rows_for_tokens(float* y, int64_t ldy, const ActBlockQ8* x, int64_t act_blocks, const uint8_t* w,
                            int64_t row_stride, int64_t num_blocks, int64_t row_begin, int64_t row_end, int64_t t0) {
  constexpr int R = T == 1 ? 4 : 2;
  int64_t r = row_begin;
  for (; r + R <= row_end; r += R) dot_tile<Ty, R, T>(y, ldy, x, act_blocks, w, row_stride, num_blocks, r, t0);
  for (; r < row_end; ++r) dot_tile<Ty, 1, T>(y, ldy, x, act_blocks, w, row_stride, num_blocks, r, t0);
}

template <class Ty>
void matmul_type(float* y, int64_t ldy, const ActBlockQ8* x, const void* w, int64_t row_stride_bytes,
                 int64_t num_tokens, int64_t cols, int64_t row_begin, int64_t row_end) {
  const int64_t num_blocks = cols / (Ty::kGroups * 32), act_blocks = cols / 32;
  const auto* wb = static_cast<const uint8_t*>(w);
  // Panels of rows small enough to stay in L1/L2 while all token tiles pass.
  constexpr int64_t kPanel = 16;
  for (int64_t p = row_begin; p < row_end; p += kPanel) {
    const int64_t p_end = p + kPanel < row_end ? p + kPanel : row_end;
    int64_t t = 0;
    for (; t + 4 <= num_tokens; t += 4)
      rows_for_tokens<Ty, 4>(y, ldy, x, act_blocks, wb, row_stride_bytes, num_blocks, p, p_end, t);
    for (; t < num_tokens; ++t)
      rows_for_tokens<Ty, 1>(y, ldy, x, act_blocks, wb, row_stride_bytes, num_blocks, p, p_end, t);
  }
}

}  // namespace

using QuantMatmulFn = void (*)(float* y, int64_t ldy, const ActBlockQ8* x, const void* w, int64_t row_stride_bytes,
                               int64_t num_tokens, int64_t cols, int64_t row_begin, int64_t row_end);

// The AVX2 kernel of each quantized type (nullptr: none, use the reference).
QuantMatmulFn quant_matmul_kernel(WeightType t) {
  switch (t) {
    case WeightType::Q4_0: return &matmul_type<Q4_0>;
    case WeightType::Q4_1: return &matmul_type<Q4_1>;
    case WeightType::Q5_0: return &matmul_type<Q5_0>;
    case WeightType::Q5_1: return &matmul_type<Q5_1>;
    case WeightType::Q8_0: return &matmul_type<Q8_0>;
    case WeightType::Q2_K: return &matmul_type<Q2_K>;
    case WeightType::Q3_K: return &matmul_type<Q3_K>;
    case WeightType::Q4_K: return &matmul_type<Q45_K<false>>;
    case WeightType::Q5_K: return &matmul_type<Q45_K<true>>;
    case WeightType::Q6_K: return &matmul_type<Q6_K>;
    case WeightType::IQ4_NL: return &matmul_type<IQ4_NL>;
    case WeightType::IQ4_XS: return &matmul_type<IQ4_XS>;
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
