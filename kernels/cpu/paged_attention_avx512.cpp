// Grouped paged attention with AVX-512 (see paged_attention.h:
// paged_attention_group), for head_dim a multiple of 16. Compiled with the flags
// of the Avx512 level (cpu_info.h) and entered only after that cpuid check in
// paged_attention.cpp; like the other SIMD units it includes no standard-library
// headers besides <cmath>'s tanh.
//
// The passes of paged_attention_avx2.cpp with 16 lanes, each query's arithmetic
// again fixed by that query alone (so it gets the same bits in any group, and
// alone):
//  1. Scores, 16 keys at a time: for each query, 16 accumulators (one per key)
//     of q . k in 16 lanes (lane l sums the columns l, l + 16, ... in order),
//     reduced to one vector of 16 scores by a transposing tree (the same tree
//     for every key, whichever of the 16 slots it has). Half the FMAs of the
//     8-lane kernel and one tree per 16 keys instead of two per 16.
//  2. Softmax per query: max, then exp16(s - max) from the query's own first
//     position, summed in 16 lanes.
//  3. Values: positions in blocks of 32 whose V rows stay in L1 while every
//     query adds its weighted sum of them, up to 8 vectors of 16 columns at a
//     time; each output column's products and their order are the 8-lane
//     kernel's, so this pass alone gives the same bits as paged_attention_avx2.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "cpu/attention_query.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports once inlined (as in matmul_avx512.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace gb::kernels::avx512 {

namespace {

#include "cpu/kv_convert.inc"
#include "cpu/paged_attention_passes.inc"

// e^x for 16 floats: exp8 of simd_exp_avx2.h lane for lane (the same clamp,
// range reduction and degree-7 Taylor polynomial).
inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-87.0f), _mm512_min_ps(_mm512_set1_ps(88.0f), x));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.42860682030941723e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

// Lane k: the horizontal sum of a[k]. Every key takes the same tree whatever
// its slot (additions commute exactly): within each 128-bit lane (c0 + c2) +
// (c1 + c3), then the 128-bit lanes (L0 + L1) + (L2 + L3).
inline __m512 transpose_sum16(const __m512 (&a)[16]) {
  __m512 x[8];
#pragma GCC unroll 8
  for (int m = 0; m < 8; ++m)  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3]
    x[m] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * m], a[2 * m + 1]), _mm512_unpackhi_ps(a[2 * m], a[2 * m + 1]));
  __m512 y[4];
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {  // per 128-bit lane: [a, b, c, d] of keys 4m..4m+3
    const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(x[2 * m]), _mm512_castps_pd(x[2 * m + 1]));
    const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(x[2 * m]), _mm512_castps_pd(x[2 * m + 1]));
    y[m] = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
  }
  // [y0.L0 + y0.L1, y0.L2 + y0.L3, y1.L0 + y1.L1, y1.L2 + y1.L3]
  const __m512 z0 = _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], 0x88), _mm512_shuffle_f32x4(y[0], y[1], 0xDD));
  const __m512 z1 = _mm512_add_ps(_mm512_shuffle_f32x4(y[2], y[3], 0x88), _mm512_shuffle_f32x4(y[2], y[3], 0xDD));
  // [(L0 + L1) + (L2 + L3)] of keys 0-3, 4-7, 8-11, 12-15.
  return _mm512_add_ps(_mm512_shuffle_f32x4(z0, z1, 0x88), _mm512_shuffle_f32x4(z0, z1, 0xDD));
}

// Lanes k with lo <= base + k < hi.
inline __mmask16 lane_mask(int32_t base, int32_t lo, int32_t hi) {
  const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(base),
                                       _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  return _mm512_cmpge_epi32_mask(idx, _mm512_set1_epi32(lo)) & _mm512_cmplt_epi32_mask(idx, _mm512_set1_epi32(hi));
}

// Pass 1: scores of every query over positions lo..hi-1, 16 at a time.
template <KvElem KE>
void score_pass(const AttentionQuery* queries, int32_t num_queries, const RowCursor& keys, const RowCursor& values,
                int32_t head_dim, int32_t lo, int32_t hi, float scale, float softcap, float* scores,
                int64_t score_stride, float* max_score) {
  __m512 running_max[256];
  for (int32_t j = 0; j < num_queries; ++j) running_max[j] = _mm512_set1_ps(kLowest);
  // The 16 keys of a step copied kKeySlot floats apart for a group (one pointer,
  // constant offsets), read in place for a lone query (see the AVX2 unit).
  constexpr int32_t kKeySlot = 256;
  alignas(64) float kbuf[16 * kKeySlot];
  const bool packed = KE != KvElem::F32 || (head_dim <= kKeySlot && num_queries > 1);
  for (int32_t t = lo; t < hi && t < lo + kPrefetchAhead; ++t) prefetch_row<true>(keys.at(t), keys.head_bytes);
  for (int32_t t0 = lo; t0 < hi; t0 += 16) {
    for (int32_t t = t0 + kPrefetchAhead; t < hi && t < t0 + kPrefetchAhead + 16; ++t)
      prefetch_row<true>(keys.at(t), keys.head_bytes);
    const float* k[16];
    for (int kk = 0; kk < 16; ++kk) {
      const int32_t t = t0 + kk < hi ? t0 + kk : hi - 1;
      k[kk] = keys.floats(t);  // read only for an F32 cache
      if (t0 + kk < hi) prefetch_row<false>(values.at(t), values.head_bytes);
    }
    if (packed)
      for (int kk = 0; kk < 16; ++kk)
        convert_row<KE>(reinterpret_cast<const uint8_t*>(k[kk]), kbuf + kk * kKeySlot, head_dim);
    for (int32_t j = 0; j < num_queries; ++j) {
      const AttentionQuery& qj = queries[j];
      if (t0 + 16 <= qj.first || t0 >= qj.num_ctx) continue;
      __m512 acc[16];
#pragma GCC unroll 16
      for (int kk = 0; kk < 16; ++kk) acc[kk] = _mm512_setzero_ps();
      if (packed) {
        for (int32_t i = 0; i < head_dim; i += 16) {
          const __m512 q = _mm512_loadu_ps(qj.q + i);
          const float* kb = kbuf + i;
#pragma GCC unroll 16
          for (int kk = 0; kk < 16; ++kk) acc[kk] = _mm512_fmadd_ps(q, _mm512_load_ps(kb + kk * kKeySlot), acc[kk]);
        }
      } else {
        for (int32_t i = 0; i < head_dim; i += 16) {
          const __m512 q = _mm512_loadu_ps(qj.q + i);
#pragma GCC unroll 16
          for (int kk = 0; kk < 16; ++kk) acc[kk] = _mm512_fmadd_ps(q, _mm512_loadu_ps(k[kk] + i), acc[kk]);
        }
      }
      __m512 s = _mm512_mul_ps(transpose_sum16(acc), _mm512_set1_ps(scale));
      float* row = scores + j * score_stride;  // row[t - first] = score of position t
      if (softcap > 0.0f) {
        alignas(64) float v[16];
        _mm512_store_ps(v, s);
        for (int kk = 0; kk < 16; ++kk) v[kk] = softcap * std::tanh(v[kk] / softcap);
        s = _mm512_load_ps(v);
      }
      if (t0 >= qj.first && t0 + 16 <= qj.num_ctx) {
        _mm512_storeu_ps(row + (t0 - qj.first), s);
        running_max[j] = _mm512_max_ps(running_max[j], s);
      } else {
        const __mmask16 m = lane_mask(t0, qj.first, qj.num_ctx);
        running_max[j] = _mm512_mask_max_ps(running_max[j], m, running_max[j], s);
        alignas(64) float v[16];
        _mm512_store_ps(v, s);
        for (int kk = 0; kk < 16; ++kk)
          if (t0 + kk >= qj.first && t0 + kk < qj.num_ctx) row[t0 + kk - qj.first] = v[kk];
      }
    }
  }
  for (int32_t j = 0; j < num_queries; ++j) max_score[j] = _mm512_reduce_max_ps(running_max[j]);
}

// Pass 2: e^(s - max) in place over the query's n scores; returns their sum
// (16 lane sums, then the lanes in the fixed order of _mm512_reduce_add_ps).
float softmax_pass(float* s, int32_t n, float max_score) {
  const __m512 m = _mm512_set1_ps(max_score);
  __m512 sum = _mm512_setzero_ps();
  int32_t t = 0;
  for (; t + 16 <= n; t += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + t), m));
    _mm512_storeu_ps(s + t, e);
    sum = _mm512_add_ps(sum, e);
  }
  if (t < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - t)) - 1u);
    const __m512 e = _mm512_maskz_mov_ps(tail, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, s + t), m)));
    _mm512_mask_storeu_ps(s + t, tail, e);
    sum = _mm512_add_ps(sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

// The 16-lane vector of the shared passes (paged_attention_passes.inc).
struct Zmm {
  using Reg = __m512;
  static constexpr int kLanes = 16;
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg set1(float x) { return _mm512_set1_ps(x); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
};

}  // namespace

void paged_attention_group(const AttentionQuery* queries, int32_t num_queries, const KvCacheRef& kv,
                           int32_t kv_head, float scale, float softcap, float* scores, int64_t score_stride) {
  attention_group<Zmm>(queries, num_queries, kv, kv_head, scale, softcap, scores, score_stride);
}

}  // namespace gb::kernels::avx512
