// AVX-512 matrix products for float weights (F32, F16, BF16). Compiled with the
// AVX-512 flags of the Avx512 level (cpu_info.h) and entered only after that
// cpuid check (matmul.cpp). Like matmul_avx2.cpp it includes no standard-library
// headers, so no inline library function compiled here can be picked by the
// linker for callers on CPUs without AVX-512.
//
// Summation order. Every (row, token) result is 16 lane sums (lane l adds the
// products of columns l, l+16, l+32, ... in column order, one FMA each), then
// one fixed tree over the lanes, then the tail columns past the last multiple of
// 16 in order. Decode (one token) and every prefill tile shape follow exactly
// this order, so a token computed alone equals the same token inside any batch
// bit for bit (speculative verification and continuous batching rely on it).
//
// Prefill runs the register-tile driver of matmul_tiles_avx512.inc (shared
// with the bf16 kernel), which keeps the order above. Decode streams the rows
// one after another.
#include <immintrin.h>

#include <cstdint>

// GCC 12's AVX-512 conversion intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized / -Wuninitialized report once inlined (a known false
// positive). Clang (the sanitizer builds) has no such warning group.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "cpu/decode_prefetch.h"
#include "cpu/simd_load_elem.h"
#include "cpu/weight_type.h"

namespace gb::kernels::avx512 {

namespace {

template <WeightType WT>
inline __m512 load16(const void* w, int64_t i) {
  if constexpr (WT == WeightType::F32) {
    return _mm512_loadu_ps(static_cast<const float*>(w) + i);
  } else if constexpr (WT == WeightType::F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(w) + i)));
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(w) + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <WeightType WT>
constexpr int64_t kElemBytes = WT == WeightType::F32 ? 4 : 2;

// The fixed lane tree: 16 -> 8 -> 4 -> 2 -> 1 (halves added).
inline float hsum(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

// Final result of one (row, token): lane tree, then the tail columns.
template <WeightType WT>
inline float finish(__m512 acc, const void* w, const float* x, int64_t row, int64_t cols, int64_t cols16) {
  float s = hsum(acc);
  for (int64_t c = cols16; c < cols; ++c) s += load_elem<WT>(w, row * cols + c) * x[c];
  return s;
}

// ---- decode: one token ----------------------------------------------------
// Each row is one accumulator (the order above), its weights streamed in
// address order. How many rows are summed side by side is per type; how far
// ahead the weights are asked for (software prefetch) is decode_prefetch() of
// the type (cpu/decode_prefetch.h: a measured choice per processor, these
// defaults else). Measured on Zen 5 with the weights in huge pages
// (backend/cpu_weights.h):
// - F16 / BF16: one row at a time, 16 KB ahead. TinyLlama F16 decode, one
//   thread, three alternating runs: 11.1-12.3 tok/s without prefetch, 14.7-15.4
//   with 16 KB ahead (2 threads 17-18 -> 23-26; 4 and 8 KB in between, 32 KB no
//   better). Four F16 rows side by side without prefetch: 13 tok/s against 19
//   this way (huge pages, Zen 5). On Zen 4 (F16, one thread, 4 KB pages) one
//   row read 21-23 GB/s against 9-15 for 2, 4 or 8 interleaved rows.
// - F32: four rows side by side, no software prefetch (one prefetch per 64-byte
//   line costs as much as it saves). A 1 GiB matrix in huge pages, one thread:
//   41-43.7 GB/s (2048 columns) and 41-43.4 (5632) against 41-42.5 and 35.5-38.5
//   for one row, and 38-39 with 16 KB prefetch; two rows side by side 33-36.
//   TinyLlama F32 decode, one thread, three alternating rounds: 9.84-9.99 tok/s
//   against 9.50-9.56 for one row (llama.cpp 9.42-9.85 in the same rounds).
// A prefetch is issued once per 64-byte line of each row (every 16 columns of
// F32, every 32 of F16 / BF16).
template <WeightType WT>
struct GemvShape {
  static constexpr int kRows = WT == WeightType::F32 ? 4 : 1;
};

template <WeightType WT, int R, bool kPrefetch>
void gemv_rows(float* y, const float* x, const void* w, int64_t cols, int64_t cols16, int64_t r, int64_t ahead) {
  __m512 acc[R];
  const char* wr[R];
  for (int i = 0; i < R; ++i) {
    acc[i] = _mm512_setzero_ps();
    wr[i] = static_cast<const char*>(w) + (r + i) * cols * kElemBytes<WT>;
  }
  for (int64_t c = 0; c < cols16; c += 16) {
    const __m512 xv = _mm512_loadu_ps(x + c);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      if constexpr (kPrefetch) {
        if (kElemBytes<WT> == 4 || (c & 31) == 0) _mm_prefetch(wr[i] + c * kElemBytes<WT> + ahead, _MM_HINT_T0);
      }
      acc[i] = _mm512_fmadd_ps(load16<WT>(w, (r + i) * cols + c), xv, acc[i]);
    }
  }
  for (int i = 0; i < R; ++i) y[r + i] = finish<WT>(acc[i], w, x, r + i, cols, cols16);
}

template <WeightType WT, bool kPrefetch>
void gemv_prefetching(float* y, const float* x, const void* w, int64_t cols, int64_t row_begin, int64_t row_end,
                      int64_t ahead) {
  constexpr int R = GemvShape<WT>::kRows;
  const int64_t cols16 = cols & ~int64_t{15};
  int64_t r = row_begin;
  for (; r + R <= row_end; r += R) gemv_rows<WT, R, kPrefetch>(y, x, w, cols, cols16, r, ahead);
  for (; r < row_end; ++r) gemv_rows<WT, 1, kPrefetch>(y, x, w, cols, cols16, r, ahead);
}

template <WeightType WT>
void gemv(float* y, const float* x, const void* w, int64_t cols, int64_t row_begin, int64_t row_end) {
  const int64_t ahead = decode_prefetch(WT);
  if (ahead > 0) {
    gemv_prefetching<WT, true>(y, x, w, cols, row_begin, row_end, ahead);
  } else {
    gemv_prefetching<WT, false>(y, x, w, cols, row_begin, row_end, 0);
  }
}

// ---- prefill: register tiles over column blocks ---------------------------
// The shared driver (matmul_tiles_avx512.inc) with float32 FMAs: 16 columns per
// step. Tile shapes measured on Zen 4 (F32, 2048 x 2048 x 256, one thread):
// 4 x 6 86 GFLOP/s, 4 x 5 81, 3 x 8 63, 3 x 7 60 (of a 115 GFLOP/s FMA peak).

#include "cpu/matmul_tiles_avx512.inc"

template <WeightType WT>
struct FmaKernel {
  using Act = float;
  static constexpr int64_t kStep = 16;
  static constexpr int64_t kColBlock = 512;  // 6 tokens x 512 x 4 B = 12 KB of activations in L1
  static constexpr int64_t kWeightBytes = kElemBytes<WT>;
  static constexpr bool kPackActivations = false;  // matmul_tiles_avx512.inc: pack_block

  template <int R, int T>
  static void tile_block(__m512 (&acc)[R][T], const float* x, int64_t ldx, const void* w, int64_t cols, int64_t r0,
                         int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; c += 16) {
      __m512 wv[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) wv[i] = load16<WT>(w, (r0 + i) * cols + c);
#pragma GCC unroll 8
      for (int j = 0; j < T; ++j) {
        const __m512 xv = _mm512_loadu_ps(x + j * ldx + (c - c0));
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) acc[i][j] = _mm512_fmadd_ps(wv[i], xv, acc[i][j]);
      }
    }
  }

  static float finish(__m512 lanes, const void* w, const float* x, int64_t row, int64_t cols, int64_t cols16) {
    return avx512::finish<WT>(lanes, w, x, row, cols, cols16);
  }
};

template <WeightType WT>
void matmul_typed(float* y, int64_t ldy, const float* x, const void* w, int64_t num_tokens, int64_t cols,
                  int64_t row_begin, int64_t row_end) {
  if (num_tokens == 1) {
    gemv<WT>(y, x, w, cols, row_begin, row_end);
    return;
  }
  tiled_gemm<FmaKernel<WT>>(y, ldy, x, w, num_tokens, cols, row_begin, row_end);
}

}  // namespace

void matmul(float* y, int64_t ldy, const float* x, const void* w, WeightType wtype, int64_t num_tokens, int64_t cols,
            int64_t row_begin, int64_t row_end) {
  switch (wtype) {
    case WeightType::F32: matmul_typed<WeightType::F32>(y, ldy, x, w, num_tokens, cols, row_begin, row_end); break;
    case WeightType::F16: matmul_typed<WeightType::F16>(y, ldy, x, w, num_tokens, cols, row_begin, row_end); break;
    case WeightType::BF16: matmul_typed<WeightType::BF16>(y, ldy, x, w, num_tokens, cols, row_begin, row_end); break;
    default: break;  // quantized types go through matmul_quant
  }
}

}  // namespace gb::kernels::avx512

namespace gb::kernels::avx512 {

// The FMA peak probe with 16-lane FMAs (see avx2::fma_probe).
double fma_probe(int64_t iterations) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 m = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(0.0001f);
  for (int64_t k = 0; k < iterations; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  }
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  volatile float sink = hsum(s);
  (void)sink;
  return 12.0 * 16 * 2 * static_cast<double>(iterations);
}

}  // namespace gb::kernels::avx512

namespace gb::kernels::avx512 {

// Sums n floats (n a multiple of 32) with four independent 16-lane
// accumulators: the bandwidth probe's streaming read at this level. Zen 5, one
// thread, 1 GiB: 40.7-41.9 GB/s against 39.0-39.6 for the AVX2 read (whose
// figure sat below what llama.cpp's F32 decode streams there, #44); software
// prefetch 4-32 KB ahead only lowers it (35.9-37.7).
float read_sum(const float* p, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + i + 48));
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
  float s = hsum(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  for (; i < n; ++i) s += p[i];
  return s;
}

}  // namespace gb::kernels::avx512
