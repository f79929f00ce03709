#include "cpu/exp_sums.h"

#include <cmath>
#include <cstring>

#include "cpu/cpu_info.h"

namespace gb::kernels {

namespace avx2 {
ExpSums exp_sums(const float* x, int64_t n, int64_t stride, float shift);
float max_strided(const float* x, int64_t n, int64_t stride);
int64_t skip_below(const float* x, int64_t n, int64_t stride, int64_t from, float threshold);
int64_t find_not_below(const float* x, int64_t n, float limit);
int64_t fill_id_logit_pairs(const float* x, int64_t n, float* out);
}  // namespace avx2

// Below this, e^(x - shift) < 1.7e-38: the AVX2 path drops it, and so does the oracle.
constexpr float kMinShifted = -87.0f;

bool exp_sums_has_simd(int64_t stride) { return (stride == 1 || stride == 2) && active_isa() != Isa::Scalar; }

ExpSums exp_sums_reference(const float* x, int64_t n, int64_t stride, float shift) {
  ExpSums s;
  for (int64_t i = 0; i < n; ++i) {
    const float d = x[i * stride] - shift;
    if (!(d >= kMinShifted)) continue;
    const double e = std::exp(static_cast<double>(d));
    s.z += e;
    s.weighted += e * static_cast<double>(d);
  }
  return s;
}

ExpSums exp_sums(const float* x, int64_t n, int64_t stride, float shift) {
  if (exp_sums_has_simd(stride)) return avx2::exp_sums(x, n, stride, shift);
  return exp_sums_reference(x, n, stride, shift);
}

float max_strided_reference(const float* x, int64_t n, int64_t stride) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = std::fmax(m, x[i * stride]);
  return m;
}

float max_strided(const float* x, int64_t n, int64_t stride) {
  if (exp_sums_has_simd(stride)) return avx2::max_strided(x, n, stride);
  return max_strided_reference(x, n, stride);
}

int64_t skip_below_reference(const float* x, int64_t n, int64_t stride, int64_t from, float threshold) {
  while (from < n && x[from * stride] < threshold) ++from;
  return from;
}

int64_t skip_below(const float* x, int64_t n, int64_t stride, int64_t from, float threshold) {
  if (exp_sums_has_simd(stride)) return avx2::skip_below(x, n, stride, from, threshold);
  return skip_below_reference(x, n, stride, from, threshold);
}

int64_t find_not_below_reference(const float* x, int64_t n, float limit) {
  for (int64_t i = 0; i < n; ++i)
    if (!(x[i] < limit)) return i;
  return n;
}

int64_t find_not_below(const float* x, int64_t n, float limit) {
  if (exp_sums_has_simd(1)) return avx2::find_not_below(x, n, limit);
  return find_not_below_reference(x, n, limit);
}

int64_t fill_id_logit_pairs_reference(const float* x, int64_t n, float* out) {
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] == -INFINITY) continue;
    const auto id = static_cast<int32_t>(i);
    std::memcpy(out + 2 * k, &id, sizeof id);
    out[2 * k + 1] = x[i];
    ++k;
  }
  return k;
}

int64_t fill_id_logit_pairs(const float* x, int64_t n, float* out) {
  if (exp_sums_has_simd(1)) return avx2::fill_id_logit_pairs(x, n, out);
  return fill_id_logit_pairs_reference(x, n, out);
}

}  // namespace gb::kernels
