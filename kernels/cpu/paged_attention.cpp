#include "cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/cpu_info.h"
#include "cpu/kv_type.h"
#include "cpu/ops.h"

namespace gb::kernels {

namespace avx2 {
void paged_attention_group(const AttentionQuery* queries, int32_t num_queries, const KvCacheRef& kv,
                           int32_t kv_head, float scale, float softcap, float* scores, int64_t score_stride);
}
namespace avx512 {
void paged_attention_group(const AttentionQuery* queries, int32_t num_queries, const KvCacheRef& kv,
                           int32_t kv_head, float scale, float softcap, float* scores, int64_t score_stride);
}

namespace {

using GroupFn = void (*)(const AttentionQuery*, int32_t, const KvCacheRef&, int32_t, float, float, float*, int64_t);

// Whether the SIMD kernels can read a cache of this type with these heads: a
// converted head is at most kMaxConvertedHead (256) values, and a block
// type's heads start on blocks.
bool simd_reads(WeightType t, int32_t head_dim) {
  if (t == WeightType::F32) return true;
  if (kv_type_row(t) == nullptr || head_dim > 256) return false;
  return head_dim % weight_traits(t).block_elements == 0;
}

// The kernel of a level for a view: AVX-512 needs head_dim % 16 == 0 (else
// its level runs the AVX2 kernel), AVX2 head_dim % 8 == 0, and both K/V types
// the SIMD kernels read (simd_reads); nullptr: the scalar reference, query by query.
GroupFn group_kernel(Isa isa, const PagedKvView& kv) {
  if (!simd_reads(kv.k_type, kv.head_dim) || !simd_reads(kv.v_type, kv.head_dim)) return nullptr;
#if defined(__x86_64__)
  if (isa >= Isa::Avx512 && kv.head_dim % 16 == 0) return &avx512::paged_attention_group;
  if (isa >= Isa::Avx2 && kv.head_dim % 8 == 0) return &avx2::paged_attention_group;
#else
  (void)isa;
#endif
  return nullptr;
}

// The head's values at `slot` of a cache of type t with rows of kv_dim values.
void read_head(const void* cache, WeightType t, int64_t slot, int32_t num_kv_heads, int32_t head_dim, int32_t kv_head,
               float* out) {
  const WeightTypeTraits& w = weight_traits(t);
  const int64_t kv_dim = int64_t{num_kv_heads} * head_dim;
  const auto* row = static_cast<const uint8_t*>(cache) + slot * static_cast<int64_t>(kv_row_bytes(t, kv_dim));
  const int64_t first = int64_t{kv_head} * head_dim, last = first + head_dim;  // values [first, last) of the row
  const int64_t be = w.block_elements, b0 = first / be, b1 = (last + be - 1) / be;
  float tmp[1024];
  for (int64_t b = b0; b < b1;) {  // up to 1024 values of whole blocks at a time
    const int64_t nb = std::min<int64_t>(b1 - b, 1024 / be);
    w.dequantize_row(row + b * w.block_bytes, tmp, nb * be);
    const int64_t lo = std::max(first, b * be), hi = std::min(last, (b + nb) * be);
    for (int64_t i = lo; i < hi; ++i) out[i - first] = tmp[i - b * be];
    b += nb;
  }
}

}  // namespace

void PagedKvView::k_row(int32_t pos, int32_t kv_head, float* out) const {
  read_head(k_cache, k_type, slot(pos), num_kv_heads, head_dim, kv_head, out);
}
void PagedKvView::v_row(int32_t pos, int32_t kv_head, float* out) const {
  read_head(v_cache, v_type, slot(pos), num_kv_heads, head_dim, kv_head, out);
}

bool attention_has_simd_kernel(Isa isa, const PagedKvView& kv) {
  if (!isa_supported(isa)) isa = Isa::Scalar;
  return group_kernel(isa, kv) != nullptr;
}

void paged_attention_head(float* out, const float* q, const PagedKvView& kv, int32_t kv_head, int32_t num_ctx,
                          float* scores) {
  if (group_kernel(active_isa(), kv) != nullptr) {
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
  if (const GroupFn fn = group_kernel(isa, kv); fn != nullptr && num_queries <= kMaxAttentionGroup) {
    const int64_t kv_dim = int64_t{kv.num_kv_heads} * kv.head_dim;
    const KvCacheRef ref{static_cast<const uint8_t*>(kv.k_cache),
                         static_cast<const uint8_t*>(kv.v_cache),
                         kv.block_table,
                         kv.block_size,
                         kv.num_kv_heads,
                         kv.head_dim,
                         static_cast<int64_t>(kv_row_bytes(kv.k_type, kv_dim)),
                         static_cast<int64_t>(kv_row_bytes(kv.v_type, kv_dim)),
                         static_cast<int64_t>(kv_row_bytes(kv.k_type, kv.head_dim)),
                         static_cast<int64_t>(kv_row_bytes(kv.v_type, kv.head_dim)),
                         kv_type_row(kv.k_type)->elem,
                         kv_type_row(kv.v_type)->elem};
    fn(queries, num_queries, ref, kv_head, scale, softcap, scores, score_stride);
    return;
  }
  for (int32_t j = 0; j < num_queries; ++j) {
    const AttentionQuery& qj = queries[j];
    paged_attention_head_ex_reference(qj.out, qj.q, kv, kv_head, qj.num_ctx,
                                      AttentionShape{qj.first, scale, softcap, qj.sink, qj.weight_sum}, scores);
  }
}

void paged_attention_head_ex(float* out, const float* q, const PagedKvView& kv, int32_t kv_head, int32_t num_ctx,
                             const AttentionShape& shape, float* scores) {
  const AttentionQuery one{q, out, shape.first > 0 ? shape.first : 0, num_ctx, shape.sink, shape.weight_sum};
  paged_attention_group(&one, 1, kv, kv_head, shape.scale, shape.softcap, scores, num_ctx);
}

void paged_attention_head_ex_reference(float* out, const float* q, const PagedKvView& kv, int32_t kv_head,
                                       int32_t num_ctx, const AttentionShape& shape, float* scores) {
  const int32_t d = kv.head_dim;
  const float scale = shape.scale > 0.0f ? shape.scale : 1.0f / std::sqrt(static_cast<float>(d));
  const int32_t first = shape.first > 0 ? shape.first : 0;
  const int32_t n = num_ctx - first;
  std::vector<float> row(static_cast<size_t>(d));
  for (int32_t t = 0; t < n; ++t) {
    kv.k_row(first + t, kv_head, row.data());
    const float* k = row.data();
    float s = 0.0f;
    for (int32_t i = 0; i < d; ++i) s += q[i] * k[i];
    s *= scale;
    scores[t] = shape.softcap > 0.0f ? shape.softcap * std::tanh(s / shape.softcap) : s;
  }
  if (shape.sink > -std::numeric_limits<float>::infinity()) {
    // The sink joins the denominator: e^(s - m) / (sum e^(s - m) + e^(sink - m)).
    float m = shape.sink;
    for (int32_t t = 0; t < n; ++t) m = std::max(m, scores[t]);
    float sum = std::exp(shape.sink - m);
    for (int32_t t = 0; t < n; ++t) sum += scores[t] = std::exp(scores[t] - m);
    for (int32_t t = 0; t < n; ++t) scores[t] /= sum;
  } else {
    softmax_inplace(scores, n);
  }
  if (shape.weight_sum != nullptr)  // scores[t]: the normalized weight of position first + t
    for (int32_t t = 0; t < n; ++t) shape.weight_sum[first + t] += scores[t];
  for (int32_t i = 0; i < d; ++i) out[i] = 0.0f;
  for (int32_t t = 0; t < n; ++t) {
    kv.v_row(first + t, kv_head, row.data());
    const float* v = row.data();
    const float a = scores[t];
    for (int32_t i = 0; i < d; ++i) out[i] += a * v[i];
  }
}

void paged_attention_head_reference(float* out, const float* q, const PagedKvView& kv, int32_t kv_head,
                                    int32_t num_ctx, float* scores) {
  const int32_t d = kv.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> row(static_cast<size_t>(d));
  for (int32_t t = 0; t < num_ctx; ++t) {
    kv.k_row(t, kv_head, row.data());
    const float* k = row.data();
    float s = 0.0f;
    for (int32_t i = 0; i < d; ++i) s += q[i] * k[i];
    scores[t] = s * scale;
  }
  softmax_inplace(scores, num_ctx);
  for (int32_t i = 0; i < d; ++i) out[i] = 0.0f;
  for (int32_t t = 0; t < num_ctx; ++t) {
    kv.v_row(t, kv_head, row.data());
    const float* v = row.data();
    const float a = scores[t];
    for (int32_t i = 0; i < d; ++i) out[i] += a * v[i];
  }
}

}  // namespace gb::kernels
