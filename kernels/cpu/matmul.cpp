#include "cpu/matmul.h"

#include "cpu/cpu_info.h"

namespace gb::kernels {

namespace avx2 {
void matmul(float* y, int64_t ldy, const float* x, const void* w, ElemType wtype, int64_t num_tokens, int64_t cols,
            int64_t row_begin, int64_t row_end);
float read_sum(const float* p, int64_t n);
}  // namespace avx2
namespace avx512 {
void matmul(float* y, int64_t ldy, const float* x, const void* w, ElemType wtype, int64_t num_tokens, int64_t cols,
            int64_t row_begin, int64_t row_end);
}  // namespace avx512

namespace {
using MatmulFn = void (*)(float* y, int64_t ldy, const float* x, const void* w, ElemType wtype, int64_t num_tokens,
                          int64_t cols, int64_t row_begin, int64_t row_end);

// The float matmul of each kernel level (index = Isa).
#if defined(__x86_64__)
constexpr MatmulFn kMatmul[kIsaCount] = {&matmul_reference, &avx2::matmul, &avx512::matmul};
#else
constexpr MatmulFn kMatmul[kIsaCount] = {&matmul_reference, &matmul_reference, &matmul_reference};
#endif
}  // namespace

bool matmul_has_simd() { return active_isa() != Isa::Scalar; }

void matmul_with(Isa isa, float* y, int64_t ldy, const float* x, const void* w, ElemType wtype, int64_t num_tokens,
                 int64_t cols, int64_t row_begin, int64_t row_end) {
  if (!isa_supported(isa)) isa = Isa::Scalar;
  kMatmul[static_cast<int>(isa)](y, ldy, x, w, wtype, num_tokens, cols, row_begin, row_end);
}

void matmul(float* y, int64_t ldy, const float* x, const void* w, ElemType wtype, int64_t num_tokens,
            int64_t cols, int64_t row_begin, int64_t row_end) {
  static const MatmulFn fn = kMatmul[static_cast<int>(active_isa())];
  fn(y, ldy, x, w, wtype, num_tokens, cols, row_begin, row_end);
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
