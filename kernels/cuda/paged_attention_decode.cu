// Paged attention for decode steps: one query token per sequence, attending to
// its whole cached context (or its sliding window) through the block table.
// Long contexts are split in partitions of kDecodePartition keys (one block
// each) so a batch of one still fills the GPU; a merge kernel combines the partial softmaxes exactly:
//   out = sum_p exp(m_p - M) acc_p / sum_p exp(m_p - M) l_p,  M = max_p m_p.
//
// Workspace layout, P = number of partitions (ceil(max_kv_len / kDecodePartition)):
//   part_m   (num_seqs, num_heads, P)            running max of the scaled scores
//   part_l   (num_seqs, num_heads, P)            sum of exp(score - m)
//   part_acc (num_seqs, num_heads, P, head_dim)  sum of exp(score - m) * v
#include <cmath>

#include "cuda_kernels.h"
#include "device_math.cuh"

namespace gb::cuda {
namespace {

constexpr int kThreads = 256;  // >= kMaxHeadDim: the PV product maps one dim per thread

int32_t num_partitions(int32_t max_kv_len) { return (max_kv_len + kDecodePartition - 1) / kDecodePartition; }

// grid (num_seqs, num_heads, P), block kThreads.
__global__ void __launch_bounds__(kThreads)
    decode_partition_kernel(AttentionIo io, PagedKv kv, const int32_t* seq_kv_len, const int32_t* seq_token_indptr,
                            int32_t num_parts, float* part_m, float* part_l, float* part_acc) {
  __shared__ float q_s[kMaxHeadDim];
  __shared__ float p_s[kDecodePartition];  // scores, then probabilities
  __shared__ float red_s[kThreads];
  const int32_t s = blockIdx.x, h = blockIdx.y, part = blockIdx.z;
  const int32_t hd = kv.head_dim, tid = threadIdx.x;
  const int64_t out_idx = (int64_t{s} * io.num_heads + h) * num_parts + part;
  const int32_t kv_len = seq_kv_len[s];
  // A sliding window starts the context at kv_len - window; the partitions
  // cover [first, kv_len) only (never more than max_kv_len keys).
  const int32_t first = io.window > 0 ? max(0, kv_len - io.window) : 0;
  const int32_t start = first + part * kDecodePartition;
  if (start >= kv_len) {  // beyond this sequence's context: an empty partial
    if (tid == 0) {
      part_m[out_idx] = -INFINITY;
      part_l[out_idx] = 0.0f;
    }
    for (int32_t d = tid; d < hd; d += kThreads) part_acc[out_idx * hd + d] = 0.0f;
    return;
  }
  const int32_t n = min(kv_len - start, kDecodePartition);
  const int32_t kv_head = h / (io.num_heads / kv.num_kv_heads);
  const int64_t token = seq_token_indptr[s];
  const int32_t* table = kv.block_ids + kv.block_indptr[s];
  const int64_t kv_dim = int64_t{kv.num_kv_heads} * hd;
  const float scale = io.scale > 0.0f ? io.scale : 1.0f / sqrtf(static_cast<float>(hd));

  for (int32_t d = tid; d < hd; d += kThreads) q_s[d] = io.q[token * io.q_row_stride + int64_t{h} * hd + d];
  __syncthreads();

  // Scores: one key per thread.
  float local_max = -INFINITY;
  for (int32_t i = tid; i < n; i += kThreads) {
    const int32_t p = start + i;
    const int64_t slot = int64_t{table[p / kv.block_size]} * kv.block_size + p % kv.block_size;
    const int64_t k_row = slot * kv_dim + int64_t{kv_head} * hd;
    float dot = 0.0f;
    for (int32_t d = 0; d < hd; ++d) dot += q_s[d] * detail::load_as_float(kv.k, k_row + d, kv.k_type);
    const float score = dot * scale;
    p_s[i] = io.softcap > 0.0f ? io.softcap * tanhf(score / io.softcap) : score;
    local_max = fmaxf(local_max, p_s[i]);
  }
  const float m = detail::block_max(local_max, red_s);
  float local_sum = 0.0f;
  for (int32_t i = tid; i < n; i += kThreads) {
    const float e = expf(p_s[i] - m);
    p_s[i] = e;
    local_sum += e;
  }
  const float l = detail::block_sum(local_sum, red_s);  // its leading __syncthreads publishes p_s

  // P.V: thread (group g, dim d) sums keys g, g + groups, ...; then groups are folded.
  const int32_t groups = kThreads / hd;
  const int32_t g = tid / hd, d = tid % hd;
  float acc = 0.0f;
  if (g < groups) {
    for (int32_t i = g; i < n; i += groups) {
      const int32_t p = start + i;
      const int64_t slot = int64_t{table[p / kv.block_size]} * kv.block_size + p % kv.block_size;
      acc += p_s[i] * detail::load_as_float(kv.v, slot * kv_dim + int64_t{kv_head} * hd + d, kv.v_type);
    }
  }
  __syncthreads();
  red_s[tid] = acc;
  __syncthreads();
  if (tid < hd) {
    float sum = 0.0f;
    for (int32_t gi = 0; gi < groups; ++gi) sum += red_s[gi * hd + tid];
    part_acc[out_idx * hd + tid] = sum;
  }
  if (tid == 0) {
    part_m[out_idx] = m;
    part_l[out_idx] = l;
  }
}

// grid (num_seqs, num_heads), block head_dim (rounded up to a warp).
__global__ void decode_merge_kernel(AttentionIo io, int32_t head_dim, const int32_t* seq_token_indptr,
                                    int32_t num_parts, const float* part_m, const float* part_l,
                                    const float* part_acc) {
  const int32_t s = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
  if (d >= head_dim) return;
  const int64_t base = (int64_t{s} * io.num_heads + h) * num_parts;
  float m_max = -INFINITY;
  for (int32_t p = 0; p < num_parts; ++p) m_max = fmaxf(m_max, part_m[base + p]);
  float l_sum = 0.0f, acc = 0.0f;
  for (int32_t p = 0; p < num_parts; ++p) {
    if (part_l[base + p] == 0.0f) continue;  // empty partition (m = -inf)
    const float w = expf(part_m[base + p] - m_max);
    l_sum += w * part_l[base + p];
    acc += w * part_acc[(base + p) * head_dim + d];
  }
  const int64_t token = seq_token_indptr[s];
  io.out[token * int64_t{io.num_heads} * head_dim + int64_t{h} * head_dim + d] = acc / l_sum;
}

}  // namespace

size_t decode_attention_workspace_floats(int32_t num_seqs, int32_t num_heads, int32_t head_dim,
                                         int32_t max_kv_len) {
  const size_t parts = static_cast<size_t>(num_partitions(max_kv_len));
  return static_cast<size_t>(num_seqs) * static_cast<size_t>(num_heads) * parts *
         (2 + static_cast<size_t>(head_dim));
}

cudaError_t launch_paged_attention_decode(const AttentionIo& io, const PagedKv& kv, const int32_t* seq_kv_len,
                                          const int32_t* seq_token_indptr, int32_t num_seqs, int32_t max_kv_len,
                                          float* workspace, cudaStream_t stream) {
  if (num_seqs <= 0 || max_kv_len <= 0) return cudaSuccess;
  if (kv.head_dim <= 0 || kv.head_dim > kMaxHeadDim) return cudaErrorInvalidValue;
  const int32_t parts = num_partitions(max_kv_len);
  const size_t num_partials = static_cast<size_t>(num_seqs) * static_cast<size_t>(io.num_heads) * parts;
  float* part_m = workspace;
  float* part_l = part_m + num_partials;
  float* part_acc = part_l + num_partials;
  const dim3 grid(static_cast<unsigned>(num_seqs), static_cast<unsigned>(io.num_heads), static_cast<unsigned>(parts));
  decode_partition_kernel<<<grid, kThreads, 0, stream>>>(io, kv, seq_kv_len, seq_token_indptr, parts, part_m, part_l,
                                                         part_acc);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const int merge_threads = (kv.head_dim + 31) / 32 * 32;
  decode_merge_kernel<<<dim3(static_cast<unsigned>(num_seqs), static_cast<unsigned>(io.num_heads)), merge_threads, 0,
                        stream>>>(io, kv.head_dim, seq_token_indptr, parts, part_m, part_l, part_acc);
  return cudaGetLastError();
}

}  // namespace gb::cuda
