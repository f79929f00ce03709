// Grouped paged attention with AVX2/FMA (see paged_attention.h:
// paged_attention_group), for head_dim a multiple of 8. Compiled with -mavx2
// -mfma -mf16c and entered only after the CPU check in paged_attention.cpp; like
// matmul_avx2.cpp it includes no standard-library headers besides <cmath>'s tanh.
//
// Three passes per call, each with every query's arithmetic fixed by that query
// alone, so a query gets the same bits in any group (and alone):
//  1. Scores, 8 keys at a time: for each query, 8 accumulators (one per key) of
//     q . k in 8 lanes, reduced to one vector of 8 scores by a transposing tree
//     of horizontal adds (the same tree for every key). The 8 keys (2 KB at
//     head_dim 64) stay in L1 while every query of the group passes them, and a
//     lane that is not the query's (causal end, window start, past the last key)
//     is computed and not stored.
//  2. Softmax per query: max, then exp8(s - max) 8 at a time from the query's
//     own first position, summed in 8 lanes.
//  3. Values: positions in blocks of 32 whose V rows stay in L1 while every
//     query adds its weighted sum of them (position order, up to 8 vector
//     accumulators of 64 values, parked in the query's output between blocks),
//     then one multiply by 1 / sum per query.
// Measured on Zen 4 (one thread, TinyLlama shape, pp512): the kernel that read
// every score through a horizontal sum per (key, query), took e^x one value at a
// time and kept the outputs in memory ran at about 12 GFLOP/s.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "cpu/attention_query.h"
#include "cpu/simd_exp_avx2.h"

namespace gb::kernels::avx2 {

namespace {

#include "cpu/kv_convert.inc"
#include "cpu/paged_attention_passes.inc"

// Lane k: the horizontal sum of a[k], by one fixed tree for every k.
inline __m256 transpose_sum8(const __m256 (&a)[8]) {
  const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 q0 = _mm256_hadd_ps(h01, h23), q1 = _mm256_hadd_ps(h45, h67);
  // q0 = [s0 s1 s2 s3 | s0' s1' s2' s3'] (low and high halves of keys 0..3).
  return _mm256_add_ps(_mm256_permute2f128_ps(q0, q1, 0x20), _mm256_permute2f128_ps(q0, q1, 0x31));
}

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lanes k with lo <= base + k < hi all ones.
inline __m256 lane_mask(int32_t base, int32_t lo, int32_t hi) {
  const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(base), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i ge = _mm256_cmpgt_epi32(idx, _mm256_set1_epi32(lo - 1));
  const __m256i lt = _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), idx);
  return _mm256_castsi256_ps(_mm256_and_si256(ge, lt));
}

// Pass 1: scores of every query over positions lo..hi-1, 8 at a time.
template <KvElem KE>
void score_pass(const AttentionQuery* queries, int32_t num_queries, const RowCursor& keys, const RowCursor& values,
                int32_t head_dim, int32_t lo, int32_t hi, float scale, float softcap, float* scores,
                int64_t score_stride, float* max_score) {
  __m256 running_max[256];
  for (int32_t j = 0; j < num_queries; ++j) running_max[j] = _mm256_set1_ps(kLowest);
  // The 8 keys of a step, copied kKeySlot floats apart: the inner loop then
  // addresses them from one pointer with constant offsets. Through 8 separate
  // row pointers GCC kept half of them on the stack and reloaded them for every
  // 8 columns (about a fifth of the kernel's samples in perf). A lone query
  // (decode without GQA) reads its keys in place: the copy would cost it more
  // than its dot products (stories15M decode: the copy, which GCC makes a memcpy
  // call per key, was 4.2% of the step against 2.9% for the whole kernel).
  // Each lane's products and their order are the same either way.
  constexpr int32_t kKeySlot = 256;
  alignas(64) float kbuf[8 * kKeySlot];
  const bool packed = KE != KvElem::F32 || (head_dim <= kKeySlot && num_queries > 1);
  for (int32_t t = lo; t < hi && t < lo + kPrefetchAhead; ++t) prefetch_row<true>(keys.at(t), keys.head_bytes);
  for (int32_t t0 = lo; t0 < hi; t0 += 8) {
    for (int32_t t = t0 + kPrefetchAhead; t < hi && t < t0 + kPrefetchAhead + 8; ++t)
      prefetch_row<true>(keys.at(t), keys.head_bytes);
    const float* k[8];
    for (int kk = 0; kk < 8; ++kk) {
      const int32_t t = t0 + kk < hi ? t0 + kk : hi - 1;
      k[kk] = keys.floats(t);  // read only for an F32 cache
      if (t0 + kk < hi) prefetch_row<false>(values.at(t), values.head_bytes);
    }
    if (packed)
      for (int kk = 0; kk < 8; ++kk)
        convert_row<KE>(reinterpret_cast<const uint8_t*>(k[kk]), kbuf + kk * kKeySlot, head_dim);
    for (int32_t j = 0; j < num_queries; ++j) {
      const AttentionQuery& qj = queries[j];
      if (t0 + 8 <= qj.first || t0 >= qj.num_ctx) continue;
      __m256 acc[8];
      for (int kk = 0; kk < 8; ++kk) acc[kk] = _mm256_setzero_ps();
      if (packed) {
        for (int32_t i = 0; i < head_dim; i += 8) {
          const __m256 q = _mm256_loadu_ps(qj.q + i);
          const float* kb = kbuf + i;
#pragma GCC unroll 8
          for (int kk = 0; kk < 8; ++kk) acc[kk] = _mm256_fmadd_ps(q, _mm256_load_ps(kb + kk * kKeySlot), acc[kk]);
        }
      } else {
        for (int32_t i = 0; i < head_dim; i += 8) {
          const __m256 q = _mm256_loadu_ps(qj.q + i);
#pragma GCC unroll 8
          for (int kk = 0; kk < 8; ++kk) acc[kk] = _mm256_fmadd_ps(q, _mm256_loadu_ps(k[kk] + i), acc[kk]);
        }
      }
      __m256 s = _mm256_mul_ps(transpose_sum8(acc), _mm256_set1_ps(scale));
      float* row = scores + j * score_stride;  // row[t - first] = score of position t
      if (softcap > 0.0f) {
        alignas(32) float v[8];
        _mm256_store_ps(v, s);
        for (int kk = 0; kk < 8; ++kk) v[kk] = softcap * std::tanh(v[kk] / softcap);
        s = _mm256_load_ps(v);
      }
      if (t0 >= qj.first && t0 + 8 <= qj.num_ctx) {
        _mm256_storeu_ps(row + (t0 - qj.first), s);
        running_max[j] = _mm256_max_ps(running_max[j], s);
      } else {
        const __m256 m = lane_mask(t0, qj.first, qj.num_ctx);
        running_max[j] = _mm256_max_ps(running_max[j], _mm256_blendv_ps(_mm256_set1_ps(kLowest), s, m));
        alignas(32) float v[8];
        _mm256_store_ps(v, s);
        for (int kk = 0; kk < 8; ++kk)
          if (t0 + kk >= qj.first && t0 + kk < qj.num_ctx) row[t0 + kk - qj.first] = v[kk];
      }
    }
  }
  for (int32_t j = 0; j < num_queries; ++j) max_score[j] = hmax(running_max[j]);
}

// Pass 2: e^(s - max) in place over the query's n scores; returns their sum.
float softmax_pass(float* s, int32_t n, float max_score) {
  const __m256 m = _mm256_set1_ps(max_score);
  __m256 sum = _mm256_setzero_ps();
  int32_t t = 0;
  for (; t + 8 <= n; t += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + t), m));
    _mm256_storeu_ps(s + t, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (t < n) {
    alignas(32) float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int32_t i = 0; t + i < n; ++i) v[i] = s[t + i];
    const __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_load_ps(v), m)), lane_mask(t, t, n));
    _mm256_store_ps(v, e);
    for (int32_t i = 0; t + i < n; ++i) s[t + i] = v[i];
    sum = _mm256_add_ps(sum, e);
  }
  return hsum(sum);
}

// The 8-lane vector of the shared passes (paged_attention_passes.inc).
struct Ymm {
  using Reg = __m256;
  static constexpr int kLanes = 8;
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg set1(float x) { return _mm256_set1_ps(x); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
};

}  // namespace

void paged_attention_group(const AttentionQuery* queries, int32_t num_queries, const KvCacheRef& kv,
                           int32_t kv_head, float scale, float softcap, float* scores, int64_t score_stride) {
  attention_group<Ymm>(queries, num_queries, kv, kv_head, scale, softcap, scores, score_stride);
}

}  // namespace gb::kernels::avx2
