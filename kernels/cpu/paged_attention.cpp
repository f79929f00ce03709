#include "cpu/paged_attention.h"

#include <cmath>

#include "cpu/cpu_info.h"
#include "cpu/ops.h"

namespace gb::kernels {

namespace avx2 {
void paged_attention_group(const AttentionQuery* queries, int32_t num_queries, const float* k_cache,
                           const float* v_cache, const int32_t* block_table, int32_t block_size, int32_t num_kv_heads,
                           int32_t head_dim, int32_t kv_head, float scale, float softcap, float* scores,
                           int64_t score_stride);
}
namespace avx512 {
void paged_attention_group(const AttentionQuery* queries, int32_t num_queries, const float* k_cache,
                           const float* v_cache, const int32_t* block_table, int32_t block_size, int32_t num_kv_heads,
                           int32_t head_dim, int32_t kv_head, float scale, float softcap, float* scores,
                           int64_t score_stride);
}

namespace {

using GroupFn = void (*)(const AttentionQuery*, int32_t, const float*, const float*, const int32_t*, int32_t, int32_t,
                         int32_t, int32_t, float, float, float*, int64_t);

// The kernel of a level for a head size: AVX-512 needs head_dim % 16 == 0 (else
// its level runs the AVX2 kernel), AVX2 head_dim % 8 == 0; nullptr: the
// scalar reference, query by query.
GroupFn group_kernel(Isa isa, int32_t head_dim) {
#if defined(__x86_64__)
  if (isa >= Isa::Avx512 && head_dim % 16 == 0) return &avx512::paged_attention_group;
  if (isa >= Isa::Avx2 && head_dim % 8 == 0) return &avx2::paged_attention_group;
#else
  (void)isa;
  (void)head_dim;
#endif
  return nullptr;
}

}  // namespace

void paged_attention_head(float* out, const float* q, const PagedKvView& kv, int32_t kv_head, int32_t num_ctx,
                          float* scores) {
  if (group_kernel(active_isa(), kv.head_dim) != nullptr) {
    paged_attention_head_ex(out, q, kv, kv_head, num_ctx, AttentionShape{}, scores);
    return;
  }
  paged_attention_head_reference(out, q, kv, kv_head, num_ctx, scores);
}

void paged_attention_group(const AttentionQuery* queries, int32_t num_queries, const PagedKvView& kv, int32_t kv_head,
                           float scale, float softcap, float* scores, int64_t score_stride) {
  paged_attention_group_with(active_isa(), queries, num_queries, kv, kv_head, scale, softcap, scores, score_stride);
}

void paged_attention_group_with(Isa isa, const AttentionQuery* queries, int32_t num_queries, const PagedKvView& kv,
                                int32_t kv_head, float scale, float softcap, float* scores, int64_t score_stride) {
  if (num_queries <= 0) return;
  if (scale <= 0.0f) scale = 1.0f / std::sqrt(static_cast<float>(kv.head_dim));
  if (!isa_supported(isa)) isa = Isa::Scalar;
  if (const GroupFn fn = group_kernel(isa, kv.head_dim); fn != nullptr && num_queries <= kMaxAttentionGroup) {
    fn(queries, num_queries, kv.k_cache, kv.v_cache, kv.block_table, kv.block_size, kv.num_kv_heads, kv.head_dim,
       kv_head, scale, softcap, scores, score_stride);
    return;
  }
  for (int32_t j = 0; j < num_queries; ++j)
    paged_attention_head_ex_reference(queries[j].out, queries[j].q, kv, kv_head, queries[j].num_ctx,
                                      AttentionShape{queries[j].first, scale, softcap}, scores);
}

void paged_attention_head_ex(float* out, const float* q, const PagedKvView& kv, int32_t kv_head, int32_t num_ctx,
                             const AttentionShape& shape, float* scores) {
  const AttentionQuery one{q, out, shape.first > 0 ? shape.first : 0, num_ctx};
  paged_attention_group(&one, 1, kv, kv_head, shape.scale, shape.softcap, scores, num_ctx);
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
