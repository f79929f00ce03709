// AVX2/FMA paths of exp_sums.h. Compiled with -mavx2 -mfma; entered only after
// the CPU check in exp_sums.cpp. No standard-library headers (see matmul_avx2.cpp).
#include <immintrin.h>
#include <cstdint>

#include "cpu/exp_sums.h"
#include "cpu/simd_exp_avx2.h"

namespace gb::kernels::avx2 {

namespace {

// 8 consecutive elements of the strided row starting at element i; for stride 2
// `x` points one float before the first logit (the first pair's id).
inline __m256 load8(const float* x, int64_t i, int64_t stride) {
  if (stride == 1) return _mm256_loadu_ps(x + i);
  // Pairs {id, logit}: the odd floats of 16; the sums ignore the lane order.
  const __m256 a = _mm256_loadu_ps(x + 2 * i), b = _mm256_loadu_ps(x + 2 * i + 8);
  return _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
}

inline double sum4(__m256d v) {
  const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

}  // namespace

ExpSums exp_sums(const float* x, int64_t n, int64_t stride, float shift) {
  // x points at element 0; for stride 2 that is the logit of the first pair,
  // so the pair loads start one float earlier.
  const float* base = stride == 2 ? x - 1 : x;
  const __m256 vshift = _mm256_set1_ps(shift), floor = _mm256_set1_ps(-87.0f);
  __m256d z0 = _mm256_setzero_pd(), z1 = _mm256_setzero_pd(), w0 = _mm256_setzero_pd(), w1 = _mm256_setzero_pd();
  // e and e*d of 8 elements added to the float partial sums ze, we.
  const auto terms = [&](int64_t at, __m256& ze, __m256& we) {
    const __m256 d = _mm256_sub_ps(load8(base, at, stride), vshift);
    const __m256 keep = _mm256_cmp_ps(d, floor, _CMP_GE_OQ);  // false for -inf
    const __m256 e = _mm256_and_ps(exp8(d), keep);
    ze = _mm256_add_ps(ze, e);
    we = _mm256_fmadd_ps(e, _mm256_max_ps(d, floor), we);
  };
  // Partial sums of up to kChunk terms per lane are kept in float, then added
  // to the double sums: 3 float roundings at most per partial sum (relative
  // error < 1.8e-7 of the sum of |terms|), and the widening to double once per
  // 32 elements instead of every 8 (a quarter fewer instructions per element).
  constexpr int kChunk = 4;
  const auto flush = [&](__m256 ze, __m256 we) {
    z0 = _mm256_add_pd(z0, _mm256_cvtps_pd(_mm256_castps256_ps128(ze)));
    z1 = _mm256_add_pd(z1, _mm256_cvtps_pd(_mm256_extractf128_ps(ze, 1)));
    w0 = _mm256_add_pd(w0, _mm256_cvtps_pd(_mm256_castps256_ps128(we)));
    w1 = _mm256_add_pd(w1, _mm256_cvtps_pd(_mm256_extractf128_ps(we, 1)));
  };
  int64_t i = 0;
  for (; i + 8 * kChunk <= n; i += 8 * kChunk) {
    __m256 ze = _mm256_setzero_ps(), we = _mm256_setzero_ps();
    for (int j = 0; j < kChunk; ++j) terms(i + 8 * j, ze, we);
    flush(ze, we);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 ze = _mm256_setzero_ps(), we = _mm256_setzero_ps();
    terms(i, ze, we);
    flush(ze, we);
  }
  ExpSums s{sum4(_mm256_add_pd(z0, z1)), sum4(_mm256_add_pd(w0, w1))};
  // The tail, one at a time through the same exp (lane 0 of a vector).
  for (; i < n; ++i) {
    const float d = x[i * stride] - shift;
    if (!(d >= -87.0f)) continue;
    const float e = _mm256_cvtss_f32(exp8(_mm256_set1_ps(d)));
    s.z += static_cast<double>(e);
    s.weighted += static_cast<double>(e) * static_cast<double>(d);
  }
  return s;
}

float max_strided(const float* x, int64_t n, int64_t stride) {
  const float* base = stride == 2 ? x - 1 : x;
  __m256 m = _mm256_set1_ps(-__builtin_inff());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, load8(base, i, stride));
  const __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  const __m128 q = _mm_max_ps(h, _mm_movehl_ps(h, h));
  float best = _mm_cvtss_f32(_mm_max_ss(q, _mm_shuffle_ps(q, q, 1)));
  for (; i < n; ++i) best = x[i * stride] > best ? x[i * stride] : best;
  return best;
}

int64_t skip_below(const float* x, int64_t n, int64_t stride, int64_t from, float threshold) {
  const float* base = stride == 2 ? x - 1 : x;
  const __m256 t = _mm256_set1_ps(threshold);
  for (; from + 8 <= n; from += 8)
    if (_mm256_movemask_ps(_mm256_cmp_ps(load8(base, from, stride), t, _CMP_GE_OQ)) != 0) return from;
  while (from < n && x[from * stride] < threshold) ++from;
  return from;
}

int64_t find_not_below(const float* x, int64_t n, float limit) {
  const __m256 l = _mm256_set1_ps(limit);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {  // four vectors per test: the scan is one branch per 32 logits
    const __m256 a = _mm256_cmp_ps(_mm256_loadu_ps(x + i), l, _CMP_NLT_UQ);  // true for NaN
    const __m256 b = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 8), l, _CMP_NLT_UQ);
    const __m256 c = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 16), l, _CMP_NLT_UQ);
    const __m256 d = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 24), l, _CMP_NLT_UQ);
    if (_mm256_movemask_ps(_mm256_or_ps(_mm256_or_ps(a, b), _mm256_or_ps(c, d))) != 0) break;
  }
  for (; i + 8 <= n; i += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), l, _CMP_NLT_UQ));
    if (mask != 0) return i + __builtin_ctz(static_cast<unsigned>(mask));
  }
  for (; i < n; ++i)
    if (!(x[i] < limit)) return i;
  return n;
}

int64_t fill_id_logit_pairs(const float* x, int64_t n, float* out) {
  const __m256 minus_inf = _mm256_set1_ps(-__builtin_inff());
  const __m256i step = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  int64_t k = 0;
  // Elements [from, to) one at a time: a chunk with a masked token, and the tail.
  const auto one_by_one = [&](int64_t from, int64_t to) {
    for (int64_t j = from; j < to; ++j) {
      if (x[j] == -__builtin_inff()) continue;
      const int id = static_cast<int>(j);
      __builtin_memcpy(out + 2 * k, &id, sizeof id);
      out[2 * k + 1] = x[j];
      ++k;
    }
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, minus_inf, _CMP_EQ_OQ)) != 0) {
      one_by_one(i, i + 8);
      continue;
    }
    // Interleaved: pairs 0, 1 | 4, 5 and 2, 3 | 6, 7, then the halves in order.
    const __m256 ids = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(i)), step));
    const __m256 lo = _mm256_unpacklo_ps(ids, v), hi = _mm256_unpackhi_ps(ids, v);
    _mm256_storeu_ps(out + 2 * k, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(out + 2 * k + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    k += 8;
  }
  one_by_one(i, n);
  return k;
}

}  // namespace gb::kernels::avx2
