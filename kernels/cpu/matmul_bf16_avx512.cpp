// BF16 weights times BF16 activations with AVX512-BF16 (VDPBF16PS): each
// instruction multiplies 32 bf16 pairs and adds them into 16 float32 lanes, twice
// the products per instruction of a float32 FMA. Compiled with the flags of the
// Avx512Bf16 level (cpu_info.h) and entered only after that cpuid check
// (matmul_quant.cpp). Like the other SIMD files it includes no standard-library
// headers, so no inline library function compiled here can be picked by the
// linker for callers on CPUs without these instructions.
//
// Summation order. Every (row, token) result is 16 lane sums (lane l adds, in
// column order, the products of the column pairs (32k + 2l, 32k + 2l + 1), one
// VDPBF16PS each), then the fixed lane tree, then the tail columns past the last
// multiple of 32 in order. Decode and every prefill tile shape follow exactly
// this order, so a token computed alone equals the same token inside any batch
// bit for bit. Products of two bf16 values are exact in float32; VDPBF16PS
// rounds each of its two additions to nearest even and treats denormal inputs
// and outputs as zero (documented for the instruction; the reference differs
// there only for values below 1e-38).
//
// Prefill runs the register-tile driver of matmul_tiles_avx512.inc, as the
// float32 kernel does, with 32 columns per step.
#include <immintrin.h>

#include <cstdint>

#include "cpu/decode_prefetch.h"
#include "cpu/weight_type.h"

// GCC 12's AVX-512 conversion intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized / -Wuninitialized report once inlined (a known false
// positive, as in matmul_avx512.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace gb::kernels::avx512bf16 {

namespace {

// A vector cast (the same 64 bytes): there is no load intrinsic for bf16 vectors.
inline __m512bh load32(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }

inline float bf16_value(uint16_t b) {
  const __m128i v = _mm_cvtsi32_si128(static_cast<int>(static_cast<uint32_t>(b) << 16));
  return _mm_cvtss_f32(_mm_castsi128_ps(v));
}

// The fixed lane tree: 16 -> 8 -> 4 -> 2 -> 1 (halves added), as in matmul_avx512.cpp.
inline float hsum(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

inline float finish(__m512 acc, const uint16_t* w_row, const uint16_t* x, int64_t cols, int64_t cols32) {
  float s = hsum(acc);
  for (int64_t c = cols32; c < cols; ++c) s += bf16_value(w_row[c]) * bf16_value(x[c]);
  return s;
}

// ---- decode: one token ----------------------------------------------------
// Rows one after another, one accumulator each, so the weights stream in address
// order (the float32 kernel measured this the fastest way to stream on Zen 4),
// asking for the weights decode_prefetch(BF16) bytes ahead (cpu/decode_prefetch.h;
// 16 KB unless measured otherwise) once per 64-byte line, as the F16 GEMV does
// (matmul_avx512.cpp).
void gemv(float* y, const uint16_t* x, const uint16_t* w, int64_t cols, int64_t row_begin, int64_t row_end) {
  const int64_t cols32 = cols & ~int64_t{31};
  const int64_t ahead = decode_prefetch(WeightType::BF16);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint16_t* wr = w + r * cols;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t c = 0; c < cols32; c += 32) {
      if (ahead > 0) _mm_prefetch(reinterpret_cast<const char*>(wr + c) + ahead, _MM_HINT_T0);
      acc = _mm512_dpbf16_ps(acc, load32(wr + c), load32(x + c));
    }
    y[r] = finish(acc, wr, x, cols, cols32);
  }
}

// ---- prefill: the shared register-tile driver, 32 columns per step ---------

#include "cpu/matmul_tiles_avx512.inc"

struct DotKernel {
  using Act = uint16_t;
  static constexpr int64_t kStep = 32;
  static constexpr int64_t kColBlock = 1024;  // 6 tokens x 1024 x 2 B = 12 KB of activations in L1
  static constexpr int64_t kWeightBytes = 2;
  static constexpr bool kPackActivations = true;  // matmul_tiles_avx512.inc: pack_block

  template <int R, int T>
  static void tile_block(__m512 (&acc)[R][T], const uint16_t* x, int64_t ldx, const void* w, int64_t cols,
                         int64_t r0, int64_t c0, int64_t c1) {
    const auto* wb = static_cast<const uint16_t*>(w);
    for (int64_t c = c0; c < c1; c += 32) {
      __m512bh wv[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) wv[i] = load32(wb + (r0 + i) * cols + c);
#pragma GCC unroll 8
      for (int j = 0; j < T; ++j) {
        const __m512bh xv = load32(x + j * ldx + (c - c0));
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], wv[i], xv);
      }
    }
  }

  static float finish(__m512 lanes, const void* w, const uint16_t* x, int64_t row, int64_t cols, int64_t cols32) {
    return avx512bf16::finish(lanes, static_cast<const uint16_t*>(w) + row * cols, x, cols, cols32);
  }
};

}  // namespace

// y = W x for BF16 weights W (rows, cols) and BF16 activations x (num_tokens,
// cols), rows [row_begin, row_end) of each token (matmul_quant.h's layout).
void matmul_bf16(float* y, int64_t ldy, const uint16_t* x, const uint16_t* w, int64_t num_tokens, int64_t cols,
                 int64_t row_begin, int64_t row_end) {
  if (num_tokens == 1) gemv(y, x, w, cols, row_begin, row_end);
  else tiled_gemm<DotKernel>(y, ldy, x, w, num_tokens, cols, row_begin, row_end);
}

// Peak of VDPBF16PS in GFLOP/s-equivalent (two flops per product), by the
// independent chains of avx512::fma_probe: `iterations` x 12 chains x 32 products.
double dot_probe(int64_t iterations) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512bh m = (__m512bh)_mm512_set1_epi16(0x3f80);  // 1.0
  const __m512bh c = (__m512bh)_mm512_set1_epi16(0x0000);
  for (int64_t k = 0; k < iterations; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbf16_ps(a[i], m, c);
  }
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  volatile float sink = hsum(s);
  (void)sink;
  return 12.0 * 32 * 2 * static_cast<double>(iterations);
}

}  // namespace gb::kernels::avx512bf16
