// AVX2/FMA/F16C matrix products. This translation unit is compiled with
// -mavx2 -mfma -mf16c and must only be entered after a CPU feature check
// (matmul.cpp). It includes no standard-library headers on purpose: an inline
// library function instantiated here with AVX2 encodings could be picked by the
// linker for callers on CPUs without AVX2.
//
// Register tiling: a tile of R weight rows x T tokens keeps R*T float32x8
// accumulators; each 8-column step loads R weight vectors and T activation
// vectors and issues R*T FMAs. Decode (T = 1) streams 4 rows at once; prefill uses
// 4 x 3 tiles so a weight row is read from memory once per 3 tokens and the loads
// per FMA fall to 7/12.
#include <immintrin.h>

#include <cstdint>

#include "cpu/decode_prefetch.h"
#include "cpu/weight_type.h"
#include "cpu/simd_exp_avx2.h"
#include "cpu/simd_load_elem.h"

namespace gb::kernels::avx2 {

namespace {

template <WeightType WT>
inline __m256 load8(const void* w, int64_t i) {
  if constexpr (WT == WeightType::F32) {
    return _mm256_loadu_ps(static_cast<const float*>(w) + i);
  } else if constexpr (WT == WeightType::F16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w) + i)));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  __m128 shuf = _mm_movehdup_ps(lo);
  __m128 sums = _mm_add_ps(lo, shuf);
  shuf = _mm_movehl_ps(shuf, sums);
  sums = _mm_add_ss(sums, shuf);
  return _mm_cvtss_f32(sums);
}

// One R x T tile: rows r0..r0+R-1, tokens t0..t0+T-1.
template <WeightType WT, int R, int T>
inline void tile(float* y, int64_t ldy, const float* x, const void* w, int64_t cols, int64_t r0, int64_t t0) {
  // Every loop over the tile is fully unrolled so the R x T accumulators live in
  // registers; without that GCC keeps them on the stack (a load and a store per
  // FMA), which halved the GEMM speed.
  __m256 acc[R][T];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  const int64_t cols8 = cols & ~int64_t{7};
  // Two tokens (a prefill's remainder, a short verification) stream each
  // weight row about once, as decode did when it ran here: rows are only a few
  // KB, too short for the hardware prefetcher to ramp up per row, so the rows
  // four tiles ahead (the same columns) are asked for while this tile computes.
  // On the 2-core EPYC machines this took stories110M F32 decode from 23.5 to
  // 63 tok/s (1 thread).
  constexpr bool kPrefetch = T <= 2;
  constexpr int64_t kElemBytes = WT == WeightType::F32 ? 4 : 2;
  const char* next_tile = static_cast<const char*>(w) + (r0 + 4 * R) * cols * kElemBytes;
  for (int64_t c = 0; c < cols8; c += 8) {
    if constexpr (kPrefetch) {
      if ((c * kElemBytes) % 64 == 0) {
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) _mm_prefetch(next_tile + (i * cols + c) * kElemBytes, _MM_HINT_T0);
      }
    }
    __m256 xv[T];
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) xv[j] = _mm256_loadu_ps(x + (t0 + j) * cols + c);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m256 wv = load8<WT>(w, (r0 + i) * cols + c);
#pragma GCC unroll 8
      for (int j = 0; j < T; ++j) acc[i][j] = _mm256_fmadd_ps(wv, xv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) {
      float s = hsum(acc[i][j]);
      for (int64_t c = cols8; c < cols; ++c) s += load_elem<WT>(w, (r0 + i) * cols + c) * x[(t0 + j) * cols + c];
      y[(t0 + j) * ldy + r0 + i] = s;
    }
  }
}

// ---- decode: one token ----------------------------------------------------
// Rows side by side, each one accumulator in column order, hsum, then the tail
// columns: tile()'s order, so decode equals prefill bit for bit. How many rows
// per type is GemvShape; how far ahead the weights are asked for is
// decode_prefetch() of the type (cpu/decode_prefetch.h), once per 64-byte line
// of each row.
// Measured on Zen 5 at this level (GLASSBOX_CPU_ISA=avx2), huge pages,
// TinyLlama decode, one thread, two alternating rounds (tok/s): one 8-lane FMA
// chain per row is latency-bound (F16 8.8-9.9 with one row against 16.2-16.9
// with two and 17.2-17.3 with four, 64 KB ahead); F32 four rows without
// prefetch 8.3-8.7 against 7.9-8.0 for the former scheme (four rows, the
// rows four tiles ahead) and 7.6-8.0 with 32-128 KB ahead.
template <WeightType WT>
struct GemvShape {
  static constexpr int kRows = 4;
};

// No unroll pragmas here: fully unrolling this loop made decode ~12% slower,
// and with the prefetches inside the row loop (rather than one block ahead of
// the loads) F16 decode lost 5-8% (15.4-16.0 against 16.3-17.1 tok/s, Zen 5).
template <WeightType WT, int R, bool kPrefetch>
inline void gemv_rows(float* y, const float* x, const void* w, int64_t cols, int64_t cols8, int64_t r, int64_t ahead) {
  constexpr int64_t kElemBytes = WT == WeightType::F32 ? 4 : 2;
  __m256 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm256_setzero_ps();
  const char* ahead_of_rows = static_cast<const char*>(w) + r * cols * kElemBytes + ahead;
  for (int64_t c = 0; c < cols8; c += 8) {
    if constexpr (kPrefetch) {
      if ((c * kElemBytes) % 64 == 0)
        for (int i = 0; i < R; ++i) _mm_prefetch(ahead_of_rows + (i * cols + c) * kElemBytes, _MM_HINT_T0);
    }
    const __m256 xv = _mm256_loadu_ps(x + c);
    for (int i = 0; i < R; ++i) acc[i] = _mm256_fmadd_ps(load8<WT>(w, (r + i) * cols + c), xv, acc[i]);
  }
  for (int i = 0; i < R; ++i) {
    float s = hsum(acc[i]);
    for (int64_t c = cols8; c < cols; ++c) s += load_elem<WT>(w, (r + i) * cols + c) * x[c];
    y[r + i] = s;
  }
}

template <WeightType WT, int R, bool kPrefetch>
void gemv_shaped(float* y, const float* x, const void* w, int64_t cols, int64_t row_begin, int64_t row_end,
                 int64_t ahead) {
  const int64_t cols8 = cols & ~int64_t{7};
  int64_t r = row_begin;
  for (; r + R <= row_end; r += R) gemv_rows<WT, R, kPrefetch>(y, x, w, cols, cols8, r, ahead);
  for (; r < row_end; ++r) gemv_rows<WT, 1, kPrefetch>(y, x, w, cols, cols8, r, ahead);
}

template <WeightType WT>
void gemv(float* y, const float* x, const void* w, int64_t cols, int64_t row_begin, int64_t row_end) {
  constexpr int R = GemvShape<WT>::kRows;
  const int64_t ahead = decode_prefetch(WT);
  if (ahead > 0) {
    gemv_shaped<WT, R, true>(y, x, w, cols, row_begin, row_end, ahead);
  } else {
    gemv_shaped<WT, R, false>(y, x, w, cols, row_begin, row_end, 0);
  }
}

template <WeightType WT, int T>
inline void rows_for_tokens(float* y, int64_t ldy, const float* x, const void* w, int64_t cols, int64_t row_begin,
                            int64_t row_end, int64_t t0) {
  int64_t r = row_begin;
  if constexpr (T == 1) {
    // A lone token after the tiles of three: the decode loop (the same order).
    gemv<WT>(y + t0 * ldy, x + t0 * cols, w, cols, row_begin, row_end);
  } else {
    for (; r + 4 <= row_end; r += 4) tile<WT, 4, T>(y, ldy, x, w, cols, r, t0);
    for (; r < row_end; ++r) tile<WT, 1, T>(y, ldy, x, w, cols, r, t0);
  }
}

template <WeightType WT>
void matmul_typed(float* y, int64_t ldy, const float* x, const void* w, int64_t num_tokens, int64_t cols,
                  int64_t row_begin, int64_t row_end) {
  // Rows in panels of 64 so a panel of weights stays in L2 while all token
  // tiles pass over it.
  constexpr int64_t kPanel = 128;
  if (num_tokens == 1) {
    gemv<WT>(y, x, w, cols, row_begin, row_end);
    return;
  }
  for (int64_t p = row_begin; p < row_end; p += kPanel) {
    const int64_t p_end = p + kPanel < row_end ? p + kPanel : row_end;
    int64_t t = 0;
    for (; t + 3 <= num_tokens; t += 3) rows_for_tokens<WT, 3>(y, ldy, x, w, cols, p, p_end, t);
    if (num_tokens - t == 2) rows_for_tokens<WT, 2>(y, ldy, x, w, cols, p, p_end, t);
    if (num_tokens - t == 1) rows_for_tokens<WT, 1>(y, ldy, x, w, cols, p, p_end, t);
  }
}

}  // namespace

void matmul(float* y, int64_t ldy, const float* x, const void* w, WeightType wtype, int64_t num_tokens, int64_t cols,
            int64_t row_begin, int64_t row_end) {
  switch (wtype) {
    case WeightType::F32: matmul_typed<WeightType::F32>(y, ldy, x, w, num_tokens, cols, row_begin, row_end); break;
    case WeightType::F16: matmul_typed<WeightType::F16>(y, ldy, x, w, num_tokens, cols, row_begin, row_end); break;
    case WeightType::BF16: matmul_typed<WeightType::BF16>(y, ldy, x, w, num_tokens, cols, row_begin, row_end); break;
    default: break;  // quantized types go through matmul_quant_avx2.cpp
  }
}

}  // namespace gb::kernels::avx2

namespace gb::kernels::avx2 {

// Sums n floats (n a multiple of 32) with four independent accumulators: a pure
// streaming read used to measure the machine's memory bandwidth.
float read_sum(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

}  // namespace gb::kernels::avx2

namespace gb::kernels::avx2 {

// out = silu(gate) * up = gate * up / (1 + e^-gate), 8 lanes at a time.
void swiglu(float* out, const float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    const __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + __builtin_expf(-gate[i])) * up[i];
}

}  // namespace gb::kernels::avx2

namespace gb::kernels::avx2 {

// Floating-point operations of `iterations` rounds of 12 independent 8-lane
// FMA chains (enough chains to cover the FMA latency on every current core):
// the FMA peak probe. Returns the flop count; the caller times it.
double fma_probe(int64_t iterations) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 m = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(0.0001f);
  for (int64_t k = 0; k < iterations; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  }
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  volatile float sink = hsum(s);
  (void)sink;
  return 12.0 * 8 * 2 * static_cast<double>(iterations);
}

}  // namespace gb::kernels::avx2

namespace gb::kernels::avx2 {

// n float32 values to bfloat16, round to nearest even, NaN to a quiet NaN: the
// same bits as f32_to_bf16 (convert.cpp), 8 lanes at a time.
void round_to_bf16(const float* x, int64_t n, uint16_t* out) {
  const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i r[2];
    for (int h = 0; h < 2; ++h) {
      const __m256i v = _mm256_castps_si256(_mm256_loadu_ps(x + i + 8 * h));
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(v, 16), one);
      const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(v, _mm256_add_epi32(half, lsb)), 16);
      const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(v, abs_mask), inf);
      const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(v, 16), quiet);
      r[h] = _mm256_blendv_epi8(rounded, nan, is_nan);
    }
    // Values are 0..0xffff, so the unsigned saturating pack keeps them; it packs
    // per 128-bit lane, so put the 64-bit quarters back in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
  for (; i < n; ++i) {
    uint32_t v;
    __builtin_memcpy(&v, x + i, 4);
    if ((v & 0x7fffffffu) > 0x7f800000u) out[i] = static_cast<uint16_t>((v >> 16) | 0x40u);
    else out[i] = static_cast<uint16_t>((v + 0x7fffu + ((v >> 16) & 1u)) >> 16);
  }
}

}  // namespace gb::kernels::avx2
