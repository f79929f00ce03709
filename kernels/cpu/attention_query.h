// One query of a grouped attention call (paged_attention_group in
// paged_attention.h), and the KV cache a kernel reads. Plain aggregates with no
// member functions, so the per-instruction-set kernel units may include them
// (see matmul_avx2.cpp).
#pragma once

#include <cstdint>

namespace gb::kernels {

struct AttentionQuery {
  const float* q;   // (head_dim), already rotated
  float* out;       // (head_dim)
  int32_t first;    // first position it sees (a sliding window's start, else 0)
  int32_t num_ctx;  // one past the last position it sees (its own position + 1)
  // An attention sink (gpt-oss): a learned logit of the head that joins the
  // softmax's denominator and has no value, so the weights sum to less than 1.
  // -infinity: none (the weights sum to 1, the usual attention, same bits).
  float sink = -__builtin_inff();
  // The attention mass (what the H2O and SnapKV eviction policies rank positions
  // by), accumulated while the kernel runs, with no second pass over K or V.
  // (num_ctx) or longer, indexed by position from 0; nullptr: not wanted. For
  // every position t in [first, num_ctx) the kernel adds the query's normalized
  // weight p_t = e^(s_t - m) / (sum over t' of e^(s_t' - m) [+ e^(sink - m)]),
  // exactly the weight that multiplies V[t]; positions outside are untouched,
  // and `out` has the same bits with or without it. Several queries of one call
  // may share an array (a call handles its queries one after another); the
  // caller keeps calls on other threads off it.
  float* weight_sum = nullptr;
};

// The element types a SIMD attention kernel reads K and V in (the KV types of
// kv_type.h, whose rows name theirs; quant_blocks.h gives the block layouts).
enum class KvElem : uint8_t { F32, F16, BF16, Q8_0, Q4_0, Q4_1, IQ4_NL };

// One layer of the paged cache as a kernel reads it: slot s (block b, offset o:
// s = b * block_size + o) holds a K row of k_row_bytes and a V row of
// v_row_bytes, each num_kv_heads heads of head_dim values in its type; head h
// starts h * head_dim values into the row (on a block boundary for the
// quantized types: the dispatcher sends other shapes to the scalar oracle).
struct KvCacheRef {
  const uint8_t* k_cache;
  const uint8_t* v_cache;
  const int32_t* block_table;
  int32_t block_size;
  int32_t num_kv_heads;
  int32_t head_dim;
  int64_t k_row_bytes;  // bytes per slot of K (all heads)
  int64_t v_row_bytes;
  int64_t k_head_bytes;  // bytes of one head's head_dim values of K
  int64_t v_head_bytes;
  KvElem k_elem;
  KvElem v_elem;
};

}  // namespace gb::kernels
