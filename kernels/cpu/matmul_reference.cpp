#include "cpu/convert.h"
#include "cpu/matmul.h"

namespace gb::kernels {

namespace {
inline float load(const void* w, WeightType t, int64_t i) {
  switch (t) {
    case WeightType::F32: return static_cast<const float*>(w)[i];
    case WeightType::F16: return f16_to_f32(static_cast<const uint16_t*>(w)[i]);
    case WeightType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(w)[i]);
    default: break;  // quantized types go through matmul_quant.h
  }
  return 0.0f;
}
}  // namespace

void matmul_reference(float* y, int64_t ldy, const float* x, const void* w, WeightType wtype,
                      int64_t num_tokens, int64_t cols, int64_t row_begin, int64_t row_end) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* xt = x + t * cols;
    for (int64_t r = row_begin; r < row_end; ++r) {
      float acc = 0.0f;
      for (int64_t c = 0; c < cols; ++c) acc += load(w, wtype, r * cols + c) * xt[c];
      y[t * ldy + r] = acc;
    }
  }
}

}  // namespace gb::kernels
