#include "cpu/matmul.h"

namespace gb::kernels {

namespace avx2 {
void matmul(float* y, int64_t ldy, const float* x, const void* w, ElemType wtype, int64_t num_tokens, int64_t cols,
            int64_t row_begin, int64_t row_end);
float read_sum(const float* p, int64_t n);
}

bool matmul_has_simd() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("f16c");
  return has;
#else
  return false;
#endif
}

void matmul(float* y, int64_t ldy, const float* x, const void* w, ElemType wtype, int64_t num_tokens,
            int64_t cols, int64_t row_begin, int64_t row_end) {
#if defined(__x86_64__)
  if (matmul_has_simd()) {
    avx2::matmul(y, ldy, x, w, wtype, num_tokens, cols, row_begin, row_end);
    return;
  }
#endif
  matmul_reference(y, ldy, x, w, wtype, num_tokens, cols, row_begin, row_end);
}

float read_sum(const float* p, int64_t n) {
#if defined(__x86_64__)
  if (matmul_has_simd()) return avx2::read_sum(p, n);
#endif
  float acc[8] = {};
  for (int64_t i = 0; i < n; ++i) acc[i & 7] += p[i];
  return acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
}

}  // namespace gb::kernels
