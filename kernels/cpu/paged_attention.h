// Attention of one query head over a sequence's context, reading K and V through
// a block table (PagedAttention on the CPU).
//
//   k_cache, v_cache: one layer of the pool, (num_blocks, block_size, num_kv_heads, head_dim)
//                     values of the view's K and V types (kv_type.h: F32 by
//                     default, F16, BF16 or 32-value blocks along each slot's row)
//   block_table:      (ceil(num_ctx / block_size)) block ids; position p lives in
//                     block block_table[p / block_size], slot p % block_size
//   q:                (head_dim) the query of head `head`, already rotated
//   out:              (head_dim)
//   scores:           scratch, (num_ctx)
// Causality is the caller's: num_ctx = position of the query + 1.
#pragma once

#include <cstdint>

#include "cpu/attention_query.h"
#include "cpu/cpu_info.h"
#include "cpu/weight_type.h"

namespace gb::kernels {

struct PagedKvView {
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const int32_t* block_table = nullptr;
  int32_t block_size = 16;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  WeightType k_type = WeightType::F32;  // a KV type (kv_type.h)
  WeightType v_type = WeightType::F32;

  // F32 caches only: the head's row in place.
  const float* k_at(int32_t pos, int32_t kv_head) const {
    return static_cast<const float*>(k_cache) + offset(pos, kv_head);
  }
  const float* v_at(int32_t pos, int32_t kv_head) const {
    return static_cast<const float*>(v_cache) + offset(pos, kv_head);
  }
  int64_t offset(int32_t pos, int32_t kv_head) const {
    return (slot(pos) * num_kv_heads + kv_head) * head_dim;
  }
  int64_t slot(int32_t pos) const {
    return static_cast<int64_t>(block_table[pos / block_size]) * block_size + pos % block_size;
  }
  // Any type: the head's head_dim values at pos as float32 (the weight-type
  // table's scalar dequantization of the blocks that hold them).
  void k_row(int32_t pos, int32_t kv_head, float* out) const;
  void v_row(int32_t pos, int32_t kv_head, float* out) const;
};

// Uses the SIMD kernels of paged_attention_group (AVX-512 for head_dim % 16 ==
// 0, AVX2 for head_dim % 8 == 0) when the CPU has them.
void paged_attention_head(float* out, const float* q, const PagedKvView& kv, int32_t kv_head, int32_t num_ctx,
                          float* scores);
// Attention over positions first .. num_ctx - 1 only (a sliding window starts at
// first = max(0, pos - W + 1)), with the scores multiplied by `scale` and, when
// softcap > 0, replaced by softcap * tanh(score / softcap) before the softmax
// (Gemma 2). Uses the SIMD kernels when the CPU has them (with
// first 0, the default scale and no cap it computes exactly paged_attention_head);
// paged_attention_head_ex_reference is its scalar oracle.
struct AttentionShape {
  int32_t first = 0;
  float scale = 0.0f;    // 0: 1/sqrt(head_dim)
  float softcap = 0.0f;  // 0: none
  float sink = -__builtin_inff();  // the head's attention sink logit (AttentionQuery::sink); -inf: none
  float* weight_sum = nullptr;     // (num_ctx): += each position's weight (AttentionQuery::weight_sum)
};
void paged_attention_head_ex(float* out, const float* q, const PagedKvView& kv, int32_t kv_head, int32_t num_ctx,
                             const AttentionShape& shape, float* scores);
void paged_attention_head_ex_reference(float* out, const float* q, const PagedKvView& kv, int32_t kv_head,
                                       int32_t num_ctx, const AttentionShape& shape, float* scores);
// Several queries that read the same KV head of one sequence (the query heads
// of a GQA group, at one or more positions of a prefill): each K and V row is
// read once for all of them. Query j sees positions first .. num_ctx - 1 and
// writes out (head_dim); its result equals paged_attention_head_ex with
// AttentionShape{first, scale, softcap, sink} bit for bit, whatever the other
// queries are. A query with weight_sum set also adds its softmax weights there
// (AttentionQuery::weight_sum: the attention mass), a side output that changes
// no bit of out. scores: scratch of num_queries * score_stride floats,
// score_stride >= the widest num_ctx - first. At most kMaxAttentionGroup
// queries per call.
inline constexpr int32_t kMaxAttentionGroup = 256;
void paged_attention_group(const AttentionQuery* queries, int32_t num_queries, const PagedKvView& kv, int32_t kv_head,
                           float scale, float softcap, float* scores, int64_t score_stride);
// paged_attention_group with a given kernel level (the reference when this CPU
// lacks it; a level's kernel needs head_dim % 16 == 0 for AVX-512, else the
// AVX2 one runs, % 8 for AVX2): for tests and benchmarks that compare levels.
// Each level keeps the grouped-equals-alone bits within itself; levels differ
// in their summation trees.
void paged_attention_group_with(Isa isa, const AttentionQuery* queries, int32_t num_queries, const PagedKvView& kv,
                                int32_t kv_head, float scale, float softcap, float* scores, int64_t score_stride);

// Whether paged_attention_group_with(isa, ...) runs a SIMD kernel for this
// view (else the scalar reference): the level's head-size rule, and for K/V
// types other than F32 head_dim <= 256 and, for the block types, head_dim a
// multiple of 32 (every head's values start on a block).
bool attention_has_simd_kernel(Isa isa, const PagedKvView& kv);

// The scalar oracle (run.c's arithmetic).
void paged_attention_head_reference(float* out, const float* q, const PagedKvView& kv, int32_t kv_head,
                                    int32_t num_ctx, float* scores);

}  // namespace gb::kernels
