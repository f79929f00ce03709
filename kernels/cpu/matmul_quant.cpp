#include "cpu/matmul_quant.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "cpu/convert.h"
#include "cpu/matmul.h"

namespace gb::kernels {

void* quant_scratch(int64_t bytes) {
  struct Buffer {
    void* p = nullptr;
    int64_t size = 0;
    ~Buffer() { std::free(p); }
  };
  thread_local Buffer buf;
  if (bytes > buf.size) {
    std::free(buf.p);
    const int64_t rounded = (bytes + 4095) / 4096 * 4096;
    buf.p = std::aligned_alloc(64, static_cast<size_t>(rounded));
    if (buf.p == nullptr) {
      std::fprintf(stderr, "quant_scratch: out of memory (%lld bytes)\n", static_cast<long long>(rounded));
      std::abort();
    }
    buf.size = rounded;
  }
  return buf.p;
}

using QuantMatmulFn = void (*)(float* y, int64_t ldy, const ActBlockQ8* x, const void* w, int64_t row_stride_bytes,
                               int64_t num_tokens, int64_t cols, int64_t row_begin, int64_t row_end);
namespace avx2 {
QuantMatmulFn quant_matmul_kernel(WeightType t);
void quantize_activations(const float* x, int64_t cols, int64_t token_begin, int64_t token_end, ActBlockQ8* out);
}  // namespace avx2
namespace avx512 {
QuantMatmulFn quant_matmul_kernel(WeightType t);
}  // namespace avx512
namespace avx2 {
void round_to_bf16(const float* x, int64_t n, uint16_t* out);
}  // namespace avx2
namespace avx512bf16 {
void matmul_bf16(float* y, int64_t ldy, const uint16_t* x, const uint16_t* w, int64_t num_tokens, int64_t cols,
                 int64_t row_begin, int64_t row_end);
}  // namespace avx512bf16

namespace {

// Programmer errors (kernels do not depend on engine/core): fail hard with the line.
#define GB_KCHECK(expr)                                                                  \
  do {                                                                                   \
    if (!(expr)) {                                                                       \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #expr);     \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

void quantize_activations_scalar(const float* x, int64_t cols, int64_t token_begin, int64_t token_end,
                                 ActBlockQ8* out) {
  const int64_t blocks = cols / kActBlock;
  for (int64_t t = token_begin; t < token_end; ++t) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* v = x + t * cols + b * kActBlock;
      ActBlockQ8& o = out[t * blocks + b];
      float amax = 0.0f;
      for (int i = 0; i < kActBlock; ++i) amax = std::fmax(amax, std::fabs(v[i]));
      o.d = amax / 127.0f;
      const float id = o.d != 0.0f ? 127.0f / amax : 0.0f;
      int sums[2] = {0, 0};
      for (int i = 0; i < kActBlock; ++i) {
        const int q = static_cast<int>(std::nearbyint(v[i] * id));
        o.qs[i] = static_cast<int8_t>(q);
        sums[i / 16] += q;
      }
      o.sum[0] = static_cast<int16_t>(sums[0]);
      o.sum[1] = static_cast<int16_t>(sums[1]);
    }
  }
}
}  // namespace

void quantize_activations(const float* x, int64_t cols, int64_t token_begin, int64_t token_end, ActBlockQ8* out) {
  GB_KCHECK(cols % kActBlock == 0);
#if defined(__x86_64__)
  if (matmul_has_simd()) {
    avx2::quantize_activations(x, cols, token_begin, token_end, out);
    return;
  }
#endif
  quantize_activations_scalar(x, cols, token_begin, token_end, out);
}

void round_activations_bf16(const float* x, int64_t cols, int64_t token_begin, int64_t token_end, uint16_t* out) {
  const float* src = x + token_begin * cols;
  uint16_t* dst = out + token_begin * cols;
  const int64_t n = (token_end - token_begin) * cols;
#if defined(__x86_64__)
  if (matmul_has_simd()) {
    avx2::round_to_bf16(src, n, dst);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

void matmul_weights_reference(float* y, int64_t ldy, const MatmulInput& x, const void* w, int64_t row_stride_bytes,
                              const WeightTypeTraits& traits, int64_t num_tokens, int64_t cols, int64_t row_begin,
                              int64_t row_end) {
  const ActivationType a = traits.activation;
  GB_KCHECK(a == ActivationType::Q8 ? x.q8 != nullptr : a == ActivationType::BF16 ? x.bf16 != nullptr : x.f32 != nullptr);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const void* act = a == ActivationType::Q8     ? static_cast<const void*>(x.q8 + t * (cols / kActBlock))
                      : a == ActivationType::BF16 ? static_cast<const void*>(x.bf16 + t * cols)
                                                  : static_cast<const void*>(x.f32 + t * cols);
    for (int64_t r = row_begin; r < row_end; ++r)
      y[t * ldy + r] = traits.vec_dot(cols, static_cast<const uint8_t*>(w) + r * row_stride_bytes, act);
  }
}

namespace {
// The SIMD kernel of type t at a level (nullptr: none, the reference runs).
QuantMatmulFn quant_kernel(Isa isa, WeightType t) {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::Avx512Bf16:  // the bf16 level adds nothing for quantized weights
    case Isa::Avx512: return avx512::quant_matmul_kernel(t);
    case Isa::Avx2: return avx2::quant_matmul_kernel(t);
    case Isa::Scalar: return nullptr;
  }
#endif
  (void)isa;
  (void)t;
  return nullptr;
}
}  // namespace

void matmul_weights_with(Isa isa, float* y, int64_t ldy, const MatmulInput& x, const void* w,
                         int64_t row_stride_bytes, const WeightTypeTraits& traits, int64_t num_tokens, int64_t cols,
                         int64_t row_begin, int64_t row_end) {
  if (!isa_supported(isa)) isa = Isa::Scalar;
  if (traits.activation == ActivationType::F32) {
    // Float weights: the float32 matmul (contiguous rows, stride = cols values).
    GB_KCHECK(row_stride_bytes == cols * traits.block_bytes);
    matmul_with(isa, y, ldy, x.f32, w, traits.type, num_tokens, cols, row_begin, row_end);
    return;
  }
  if (traits.activation == ActivationType::BF16) {
    GB_KCHECK(x.bf16 != nullptr && row_stride_bytes == cols * traits.block_bytes);
#if defined(__x86_64__)
    if (isa == Isa::Avx512Bf16) {
      avx512bf16::matmul_bf16(y, ldy, x.bf16, static_cast<const uint16_t*>(w), num_tokens, cols, row_begin, row_end);
      return;
    }
#endif
    // Without bf16 dot products: the level's float32 kernel on the activations
    // widened back to float32 (exact), so every level computes the same products.
    // Each thread widens the whole input once per matrix: 0.9% of a two-thread
    // BF16 pp512 at the AVX2 level (perf, stories110M), so not worth a second
    // activation buffer in the backend.
    auto* xf = static_cast<float*>(quant_scratch(num_tokens * cols * static_cast<int64_t>(sizeof(float))));
    bf16_to_f32_row(x.bf16, xf, static_cast<size_t>(num_tokens * cols));
    matmul_with(isa, y, ldy, xf, w, traits.type, num_tokens, cols, row_begin, row_end);
    return;
  }
  GB_KCHECK(x.q8 != nullptr && cols % traits.block_elements == 0);
  if (auto fn = quant_kernel(isa, traits.type)) {
    fn(y, ldy, x.q8, w, row_stride_bytes, num_tokens, cols, row_begin, row_end);
    return;
  }
  matmul_weights_reference(y, ldy, x, w, row_stride_bytes, traits, num_tokens, cols, row_begin, row_end);
}

void matmul_weights(float* y, int64_t ldy, const MatmulInput& x, const void* w, int64_t row_stride_bytes,
                    const WeightTypeTraits& traits, int64_t num_tokens, int64_t cols, int64_t row_begin,
                    int64_t row_end) {
  matmul_weights_with(active_isa(), y, ldy, x, w, row_stride_bytes, traits, num_tokens, cols, row_begin, row_end);
}

bool matmul_weights_has_simd(WeightType t) {
  return active_isa() != Isa::Scalar && (!is_quantized(t) || quant_kernel(active_isa(), t) != nullptr);
}

}  // namespace gb::kernels
