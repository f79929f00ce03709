#include "cpu/paged_attention.h"

#include <cmath>

#include "cpu/matmul.h"
#include "cpu/ops.h"

namespace gb::kernels {

namespace avx2 {
void paged_attention_head(float* out, const float* q, const float* k_cache, const float* v_cache,
                          const int32_t* block_table, int32_t block_size, int32_t num_kv_heads, int32_t head_dim,
                          int32_t kv_head, int32_t first, int32_t num_ctx, float scale, float softcap,
                          float* scores);
}

void paged_attention_head(float* out, const float* q, const PagedKvView& kv, int32_t kv_head, int32_t num_ctx,
                          float* scores) {
#if defined(__x86_64__)
  if (matmul_has_simd() && kv.head_dim % 8 == 0) {
    avx2::paged_attention_head(out, q, kv.k_cache, kv.v_cache, kv.block_table, kv.block_size, kv.num_kv_heads,
                               kv.head_dim, kv_head, 0, num_ctx, 1.0f / std::sqrt(static_cast<float>(kv.head_dim)),
                               0.0f, scores);
    return;
  }
#endif
  paged_attention_head_reference(out, q, kv, kv_head, num_ctx, scores);
}

void paged_attention_head_ex(float* out, const float* q, const PagedKvView& kv, int32_t kv_head, int32_t num_ctx,
                             const AttentionShape& shape, float* scores) {
  const float scale = shape.scale > 0.0f ? shape.scale : 1.0f / std::sqrt(static_cast<float>(kv.head_dim));
  const int32_t first = shape.first > 0 ? shape.first : 0;
#if defined(__x86_64__)
  if (matmul_has_simd() && kv.head_dim % 8 == 0) {
    avx2::paged_attention_head(out, q, kv.k_cache, kv.v_cache, kv.block_table, kv.block_size, kv.num_kv_heads,
                               kv.head_dim, kv_head, first, num_ctx, scale, shape.softcap, scores);
    return;
  }
#endif
  paged_attention_head_ex_reference(out, q, kv, kv_head, num_ctx, shape, scores);
}

void paged_attention_head_ex_reference(float* out, const float* q, const PagedKvView& kv, int32_t kv_head,
                                       int32_t num_ctx, const AttentionShape& shape, float* scores) {
  const int32_t d = kv.head_dim;
  const float scale = shape.scale > 0.0f ? shape.scale : 1.0f / std::sqrt(static_cast<float>(d));
  const int32_t first = shape.first > 0 ? shape.first : 0;
  const int32_t n = num_ctx - first;
  for (int32_t t = 0; t < n; ++t) {
    const float* k = kv.k_at(first + t, kv_head);
    float s = 0.0f;
    for (int32_t i = 0; i < d; ++i) s += q[i] * k[i];
    s *= scale;
    scores[t] = shape.softcap > 0.0f ? shape.softcap * std::tanh(s / shape.softcap) : s;
  }
  softmax_inplace(scores, n);
  for (int32_t i = 0; i < d; ++i) out[i] = 0.0f;
  for (int32_t t = 0; t < n; ++t) {
    const float* v = kv.v_at(first + t, kv_head);
    const float a = scores[t];
    for (int32_t i = 0; i < d; ++i) out[i] += a * v[i];
  }
}

void paged_attention_head_reference(float* out, const float* q, const PagedKvView& kv, int32_t kv_head,
                                    int32_t num_ctx, float* scores) {
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
