#include "cpu/paged_attention.h"

#include <cmath>

#include "cpu/ops.h"

namespace gb::kernels {

void paged_attention_head(float* out, const float* q, const PagedKvView& kv, int32_t kv_head, int32_t num_ctx,
                          float* scores) {
  const int32_t d = kv.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int32_t t = 0; t < num_ctx; ++t) {
    const float* k = kv.k_at(t, kv_head);
    float s = 0.0f;
    for (int32_t i = 0; i < d; ++i) s += q[i] * k[i];
    scores[t] = s * scale;
  }
  softmax_inplace(scores, num_ctx);
  for (int32_t i = 0; i < d; ++i) out[i] = 0.0f;
  for (int32_t t = 0; t < num_ctx; ++t) {
    const float* v = kv.v_at(t, kv_head);
    const float a = scores[t];
    for (int32_t i = 0; i < d; ++i) out[i] += a * v[i];
  }
}

}  // namespace gb::kernels
