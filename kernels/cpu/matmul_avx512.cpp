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
// Prefill keeps a register tile of kR rows x kT tokens (24 of the 32
// zmm registers) and blocks the columns so the tokens' activations stay in L1 while
// a panel of weight rows (sized to L2) passes under them; the lane sums of a
// tile are parked in a small buffer between column blocks, which keeps the
// order above. Decode streams the rows one after another.
#include <immintrin.h>

#include <cstdint>

// GCC 12's AVX-512 conversion intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized / -Wuninitialized report once inlined (a known false
// positive). Clang (the sanitizer builds) has no such warning group.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "cpu/elem_type.h"
#include "cpu/simd_load_elem.h"

namespace gb::kernels::avx512 {

namespace {

template <ElemType WT>
inline __m512 load16(const void* w, int64_t i) {
  if constexpr (WT == ElemType::F32) {
    return _mm512_loadu_ps(static_cast<const float*>(w) + i);
  } else if constexpr (WT == ElemType::F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(w) + i)));
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(w) + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <ElemType WT>
constexpr int64_t kElemBytes = WT == ElemType::F32 ? 4 : 2;

// The fixed lane tree: 16 -> 8 -> 4 -> 2 -> 1 (halves added).
inline float hsum(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

// Final result of one (row, token): lane tree, then the tail columns.
template <ElemType WT>
inline float finish(__m512 acc, const void* w, const float* x, int64_t row, int64_t cols, int64_t cols16) {
  float s = hsum(acc);
  for (int64_t c = cols16; c < cols; ++c) s += load_elem<WT>(w, row * cols + c) * x[c];
  return s;
}

// ---- decode: one token ----------------------------------------------------
// Rows one after another, one accumulator each: the weights stream strictly in
// address order, which the hardware prefetcher follows best. Measured on Zen 4
// (F16, one thread, cold cache): 21-23 GB/s this way against 9-15 GB/s for 2,
// 4 or 8 interleaved rows with or without software prefetch, and 15-19 GB/s for
// one row with four accumulators (which would also break the order above). One
// FMA chain per row still allows 32 B of F16 weights per FMA latency, above the
// memory's rate.

template <ElemType WT>
void gemv(float* y, const float* x, const void* w, int64_t cols, int64_t row_begin, int64_t row_end) {
  const int64_t cols16 = cols & ~int64_t{15};
  for (int64_t r = row_begin; r < row_end; ++r) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t c = 0; c < cols16; c += 16) acc = _mm512_fmadd_ps(load16<WT>(w, r * cols + c), _mm512_loadu_ps(x + c), acc);
    y[r] = finish<WT>(acc, w, x, r, cols, cols16);
  }
}

// ---- prefill: register tiles over column blocks ---------------------------

// Register tile: kR weight rows x kT tokens (24 accumulators + 4 weight
// vectors + 1 activation vector of the 32 registers). Measured on Zen 4 (F32,
// 2048 x 2048 x 256, one thread): 4 x 6 86 GFLOP/s, 4 x 5 81, 3 x 8 63, 3 x 7
// 60 (of a 115 GFLOP/s FMA peak).
constexpr int kR = 4;
constexpr int kT = 6;
constexpr int64_t kColBlock = 512;  // columns per block: 6 tokens x 512 x 4 B = 12 KB of activations in L1
constexpr int64_t kPanelBytes = 384 * 1024;  // weight rows per panel: about this many bytes (L2)

// One column block [c0, c1) (multiples of 16) of an R x T tile; acc holds the
// lane sums so far and is updated in place.
template <ElemType WT, int R, int T>
inline void tile_block(__m512 (&acc)[R][T], const float* x, int64_t ldx, const void* w, int64_t cols, int64_t r0,
                       int64_t c0, int64_t c1) {
  for (int64_t c = c0; c < c1; c += 16) {
    __m512 wv[R];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) wv[i] = load16<WT>(w, (r0 + i) * cols + c);
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) {
      const __m512 xv = _mm512_loadu_ps(x + j * ldx + c);
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) acc[i][j] = _mm512_fmadd_ps(wv[i], xv, acc[i][j]);
    }
  }
}

// Rows [p0, p1) of a panel times tokens t0..t0+T-1, all columns. `park` holds
// the lane sums of every row tile of the panel between column blocks.
template <ElemType WT, int T>
void panel_tokens(float* y, int64_t ldy, const float* x, const void* w, int64_t cols, int64_t p0, int64_t p1,
                  int64_t t0, __m512* park) {
  const int64_t cols16 = cols & ~int64_t{15};
  const float* xt = x + t0 * cols;
  for (int64_t c0 = 0; c0 < cols16; c0 += kColBlock) {
    const int64_t c1 = c0 + kColBlock < cols16 ? c0 + kColBlock : cols16;
    int64_t r = p0;
    __m512* slot = park;
    for (; r + kR <= p1; r += kR, slot += kR * T) {
      __m512 acc[kR][T];
#pragma GCC unroll 8
      for (int i = 0; i < kR; ++i)
#pragma GCC unroll 8
        for (int j = 0; j < T; ++j) acc[i][j] = c0 == 0 ? _mm512_setzero_ps() : slot[i * T + j];
      tile_block<WT, kR, T>(acc, xt, cols, w, cols, r, c0, c1);
#pragma GCC unroll 8
      for (int i = 0; i < kR; ++i)
#pragma GCC unroll 8
        for (int j = 0; j < T; ++j) slot[i * T + j] = acc[i][j];
    }
    for (; r < p1; ++r, slot += T) {
      __m512 acc[1][T];
#pragma GCC unroll 8
      for (int j = 0; j < T; ++j) acc[0][j] = c0 == 0 ? _mm512_setzero_ps() : slot[j];
      tile_block<WT, 1, T>(acc, xt, cols, w, cols, r, c0, c1);
#pragma GCC unroll 8
      for (int j = 0; j < T; ++j) slot[j] = acc[0][j];
    }
  }
  // Rows in the same order as above, so slot i*T+j of a tile is row r+i, token j.
  int64_t r = p0;
  const __m512* slot = park;
  const auto emit = [&](int64_t row, const __m512* lanes) {
    for (int j = 0; j < T; ++j) {
      const __m512 acc = cols16 == 0 ? _mm512_setzero_ps() : lanes[j];
      y[(t0 + j) * ldy + row] = finish<WT>(acc, w, xt + j * cols, row, cols, cols16);
    }
  };
  for (; r + kR <= p1; r += kR, slot += kR * T)
    for (int i = 0; i < kR; ++i) emit(r + i, slot + i * T);
  for (; r < p1; ++r, slot += T) emit(r, slot);
}

// The last num_tokens % kT tokens of a panel, as one tile of that width.
template <ElemType WT, int T>
void panel_tail(float* y, int64_t ldy, const float* x, const void* w, int64_t cols, int64_t p0, int64_t p1,
                int64_t t0, int64_t remaining, __m512* park) {
  if constexpr (T > 0) {
    if (remaining == T) panel_tokens<WT, T>(y, ldy, x, w, cols, p0, p1, t0, park);
    else panel_tail<WT, T - 1>(y, ldy, x, w, cols, p0, p1, t0, remaining, park);
  }
}

template <ElemType WT>
void gemm(float* y, int64_t ldy, const float* x, const void* w, int64_t num_tokens, int64_t cols, int64_t row_begin,
          int64_t row_end) {
  int64_t panel_rows = kPanelBytes / (cols * kElemBytes<WT> + 1);
  panel_rows = panel_rows < kR ? kR : panel_rows - panel_rows % kR;
  if (panel_rows > 256) panel_rows = 256 - 256 % kR;
  // Lane sums of one panel x kT tokens: at most 256 x 6 x 64 B = 96 KB (stack).
  __m512 park[256 * kT];
  for (int64_t p = row_begin; p < row_end; p += panel_rows) {
    const int64_t p_end = p + panel_rows < row_end ? p + panel_rows : row_end;
    int64_t t = 0;
    for (; t + kT <= num_tokens; t += kT) panel_tokens<WT, kT>(y, ldy, x, w, cols, p, p_end, t, park);
    panel_tail<WT, kT - 1>(y, ldy, x, w, cols, p, p_end, t, num_tokens - t, park);
  }
}

template <ElemType WT>
void matmul_typed(float* y, int64_t ldy, const float* x, const void* w, int64_t num_tokens, int64_t cols,
                  int64_t row_begin, int64_t row_end) {
  if (num_tokens == 1) {
    gemv<WT>(y, x, w, cols, row_begin, row_end);
    return;
  }
  gemm<WT>(y, ldy, x, w, num_tokens, cols, row_begin, row_end);
}

}  // namespace

void matmul(float* y, int64_t ldy, const float* x, const void* w, ElemType wtype, int64_t num_tokens, int64_t cols,
            int64_t row_begin, int64_t row_end) {
  switch (wtype) {
    case ElemType::F32: matmul_typed<ElemType::F32>(y, ldy, x, w, num_tokens, cols, row_begin, row_end); break;
    case ElemType::F16: matmul_typed<ElemType::F16>(y, ldy, x, w, num_tokens, cols, row_begin, row_end); break;
    case ElemType::BF16: matmul_typed<ElemType::BF16>(y, ldy, x, w, num_tokens, cols, row_begin, row_end); break;
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
