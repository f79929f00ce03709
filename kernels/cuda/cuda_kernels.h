// Host-side launchers for Glassbox's CUDA kernels, one .cu file per family.
// Every launcher enqueues work on `stream` and returns the launch status
// (cudaGetLastError), never waits and never aborts; the caller turns a failure
// into a gb::Status (engine/backend/cuda/cuda_check.h). Pointers are device
// pointers unless named *_host. All activations are float32 row-major; weights
// may be F32/F16/BF16 (cuBLAS, in the backend) or any quantized type with a row
// in quant_matmul.cu's kernel table, kept as their GGUF blocks. Like
// kernels/cpu, these kernels take raw pointers and the weight-type enum of
// kernels/cpu/weight_type.h, and include no engine header; the CUDA backend
// that drives them lives in engine/backend/cuda.
//
// Threads: any host thread may launch, but one stream belongs to one caller.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cpu/weight_type.h"

namespace gb::cuda {

using kernels::WeightType;  // the engine's gb::WeightType is the same type

// --- embedding.cu ------------------------------------------------------------
// out (num_tokens, dim) float = table[token_ids[t]] converted to float.
// table: (vocab_size, dim) of `dtype`; a quantized table's looked-up rows are
// dequantized (launch_dequantize_gather). Ids must already be validated.
cudaError_t launch_embedding(const int32_t* token_ids, int32_t num_tokens, const void* table, WeightType dtype,
                             int32_t dim, float* out, cudaStream_t stream);

// out (n) of `dtype` = x (n) rounded to nearest even. For feeding F16/BF16 GEMMs.
cudaError_t launch_cast(const float* x, int64_t n, void* out, WeightType dtype, cudaStream_t stream);

// --- rmsnorm.cu --------------------------------------------------------------
// out (num_rows, dim) = x[row_index[r]] / sqrt(mean(x^2) + eps) * weight.
// row_index (num_rows) may be null (row r reads x row r); x (any, dim).
cudaError_t launch_rmsnorm(const float* x, const int32_t* row_index, int32_t num_rows, int32_t dim,
                           const float* weight, float eps, float* out, cudaStream_t stream);

// Per-head RMSNorm in place (Qwen3, Gemma 3 q/k norms): each head_dim slice of
// the num_heads heads of row t (at x + t*row_stride) becomes
// slice / sqrt(mean(slice^2) + eps) * weight (head_dim).
cudaError_t launch_head_rmsnorm(float* x, int32_t num_tokens, int64_t row_stride, int32_t num_heads,
                                int32_t head_dim, const float* weight, float eps, cudaStream_t stream);

// --- elementwise.cu ----------------------------------------------------------
// x[t*row_stride + i] += bias[i] for t < num_rows, i < width (q/k/v biases on
// strided views of the fused q|k|v rows).
cudaError_t launch_add_bias(float* x, int32_t num_rows, int64_t row_stride, int32_t width, const float* bias,
                            cudaStream_t stream);
// x[i] += y[i] (n)
cudaError_t launch_add(float* x, const float* y, int64_t n, cudaStream_t stream);
// x[i] *= factor (n)
cudaError_t launch_scale(float* x, int64_t n, float factor, cudaStream_t stream);
// x[i] = cap * tanh(x[i] / cap) (n)
cudaError_t launch_softcap(float* x, int64_t n, float cap, cudaStream_t stream);

// --- rope.cu -----------------------------------------------------------------
// In place on x: rows of num_heads*head_dim floats, row t starting at
// x + t*row_stride. Within each head, the adjacent pairs (2i, 2i+1) for
// i < rope_dim/2 rotate by angle positions[t] * base^(-2i/rope_dim).
cudaError_t launch_rope(float* x, int32_t num_tokens, int64_t row_stride, int32_t num_heads,
                        int32_t head_dim, int32_t rope_dim, float base, const int32_t* positions,
                        cudaStream_t stream);

// General RoPE, as kernels/cpu rope_ex computes it (angles in double): pair i
// (i < rope_dim/2) is (2i, 2i+1) or, with neox, (i, i + rope_dim/2); it turns by
// positions[t] * freq_scale * base^(-2i/rope_dim) / freq_factors[i] (factors may
// be null), and cos and sin are multiplied by attn_factor.
struct RopeArgs {
  int32_t rope_dim = 0;
  float base = 10000.0f;
  bool neox = false;
  const float* freq_factors = nullptr;  // (rope_dim/2) device floats, or null
  float freq_scale = 1.0f;
  float attn_factor = 1.0f;
};
cudaError_t launch_rope_ex(float* x, int32_t num_tokens, int64_t row_stride, int32_t num_heads, int32_t head_dim,
                           const RopeArgs& args, const int32_t* positions, cudaStream_t stream);

// Writes the new tokens' K and V rows (kv_dim floats each, row t at k + t*row_stride)
// into one layer of the pool: k_cache/v_cache (num_blocks*block_size, kv_dim)
// values of k_type / v_type (F32, or F16 / BF16 rounded to nearest even),
// flat slot index slot_mapping[t] = block * block_size + slot.
cudaError_t launch_kv_write(const float* k, const float* v, int64_t row_stride, int32_t num_tokens,
                            int32_t kv_dim, const int32_t* slot_mapping, void* k_cache, void* v_cache,
                            cudaStream_t stream, WeightType k_type = WeightType::F32, WeightType v_type = WeightType::F32);
// The KV types the CUDA attention kernels read: F32, F16, BF16.
bool kv_type_supported(WeightType type);

// --- swiglu.cu ---------------------------------------------------------------
// out (num_tokens, hidden) = silu(gate) * up, where gate_up (num_tokens, 2*hidden)
// holds the gate projection in columns [0, hidden) and the up projection after it.
cudaError_t launch_swiglu(const float* gate_up, int32_t num_tokens, int32_t hidden, float* out,
                          cudaStream_t stream);
// The same layout with either activation: SiLU (SwiGLU) or GELU with the tanh
// approximation, 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) (GeGLU, Gemma).
enum class GatedAct { SiLU, GeluTanh };
cudaError_t launch_gated_activation(const float* gate_up, int32_t num_tokens, int32_t hidden, GatedAct act,
                                    float* out, cudaStream_t stream);

// --- paged attention (shared description) ------------------------------------
// One layer of the KV pool plus the batch's block tables (BatchLayout's CSR):
//   k, v: (num_blocks, block_size, num_kv_heads, head_dim) values of k_type / v_type
//         (F32, F16 or BF16: kv_type_supported), widened to float as they are read
//   the token at position p of sequence s is in block block_ids[block_indptr[s] + p / block_size],
//   slot p % block_size.
struct PagedKv {
  const void* k = nullptr;
  const void* v = nullptr;
  const int32_t* block_ids = nullptr;     // (total table entries)
  const int32_t* block_indptr = nullptr;  // (num_seqs + 1)
  int32_t block_size = 16;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  WeightType k_type = WeightType::F32;
  WeightType v_type = WeightType::F32;
};

// Queries and output: q row of token t at q + t*q_row_stride, head h at +h*head_dim;
// out row of token t at out + t*num_heads*head_dim. GQA: query head h reads kv
// head h / (num_heads / num_kv_heads). Scores are q.k * scale (scale 0:
// 1/sqrt(head_dim)), then softcap * tanh(score / softcap) when softcap > 0
// (Gemma 2); with window > 0 a query at position p sees only p - window + 1 .. p.
struct AttentionIo {
  const float* q = nullptr;
  int64_t q_row_stride = 0;
  float* out = nullptr;
  int32_t num_heads = 0;
  float scale = 0.0f;
  float softcap = 0.0f;
  int32_t window = 0;
};

// --- paged_attention_decode.cu -----------------------------------------------
// One query per sequence: token seq_token_indptr[s] at position seq_kv_len[s]-1
// attends to positions [0, seq_kv_len[s]) (the window's last io.window of them). The context is split in partitions
// of kDecodePartition keys, each handled by its own block; a second kernel
// merges the partial softmaxes. workspace: decode_attention_workspace_floats().
constexpr int32_t kDecodePartition = 512;
constexpr int32_t kMaxHeadDim = 256;
size_t decode_attention_workspace_floats(int32_t num_seqs, int32_t num_heads, int32_t head_dim,
                                         int32_t max_kv_len);
cudaError_t launch_paged_attention_decode(const AttentionIo& io, const PagedKv& kv, const int32_t* seq_kv_len,
                                          const int32_t* seq_token_indptr, int32_t num_seqs, int32_t max_kv_len,
                                          float* workspace, cudaStream_t stream);

// --- paged_attention_prefill.cu ----------------------------------------------
// Causal attention for a ragged batch: query tiles of up to kPrefillTileTokens
// consecutive new tokens of one sequence; query token t at positions[t] attends
// to positions [0, positions[t]] of its sequence. Online softmax over key
// chunks, so no score matrix is ever stored.
constexpr int32_t kPrefillTileTokens = 16;
struct PrefillTile {
  int32_t seq = 0;          // sequence index
  int32_t first_token = 0;  // index into the batch's tokens
  int32_t num_tokens = 0;   // 1 .. kPrefillTileTokens
};
cudaError_t launch_paged_attention_prefill(const AttentionIo& io, const PagedKv& kv, const int32_t* positions,
                                           const PrefillTile* tiles, int32_t num_tiles, cudaStream_t stream);

// --- quant_matmul.cu -----------------------------------------------------------
// Quantized weights w (rows, cols) as GGUF blocks, row r at w + r*row_stride_bytes;
// cols must be a whole number of the type's blocks. Every launcher returns
// cudaErrorInvalidValue for a type without kernels (quant_kernels_support).
constexpr int32_t kMaxGemvTokens = 8;
bool quant_kernels_support(WeightType type);

// y[t * ldy + r] = sum_c w[r, c] x[t * cols + c] + beta * y[t * ldy + r], for
// t < num_tokens <= kMaxGemvTokens (decode and small batches). beta 0 never reads y.
cudaError_t launch_quant_gemv(const void* w, int64_t row_stride_bytes, WeightType type, int64_t rows, int64_t cols,
                              const float* x, int32_t num_tokens, float* y, int64_t ldy, float beta,
                              cudaStream_t stream);

// out (num_rows, cols) float = rows [row_begin, row_begin + num_rows) of w,
// dequantized exactly as the CPU reference does (prefill tiles for cuBLAS).
cudaError_t launch_dequantize_rows(const void* w, int64_t row_stride_bytes, WeightType type, int64_t row_begin,
                                   int64_t num_rows, int64_t cols, float* out, cudaStream_t stream);

// out (num_rows, cols) float = rows row_ids[0 .. num_rows) of w, dequantized
// (the embedding lookup of a quantized table). Ids must already be validated.
cudaError_t launch_dequantize_gather(const void* w, int64_t row_stride_bytes, WeightType type, const int32_t* row_ids,
                                     int64_t num_rows, int64_t cols, float* out, cudaStream_t stream);

// --- logits_topn.cu ----------------------------------------------------------
// For each row of logits (num_rows, vocab): the top_n (id, logit) pairs in
// descending logit order (ties: lower id first; missing entries id -1),
// log_normalizer = log sum exp(logits), entropy = -sum p log p in nats.
// top_ids/top_logits (num_rows, top_n); log_normalizer/entropy (num_rows).
constexpr int32_t kMaxTopN = 256;
cudaError_t launch_logits_summary(const float* logits, int32_t num_rows, int32_t vocab, int32_t top_n,
                                  int32_t* top_ids, float* top_logits, float* log_normalizer, float* entropy,
                                  cudaStream_t stream);

}  // namespace gb::cuda
