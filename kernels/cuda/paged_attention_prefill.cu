// Causal paged attention for prefill and mixed steps over a ragged batch
// (optionally windowed and soft-capped, see AttentionIo).
// Each block takes one query tile (up to kPrefillTileTokens consecutive new
// tokens of one sequence) and one head, walks the sequence's keys in chunks of
// kKeyChunk through the block table, and keeps an online softmax per query row
// (running max m, running sum l, rescaled accumulator), so the score matrix is
// never stored beyond one (tile x chunk) piece in shared memory.
//
// Shared memory (floats), hd = head_dim:
//   q_s   (kTile, hd)    the tile's queries
//   k_s   (kKeyChunk, hd), v_s (kKeyChunk, hd)   one chunk of keys and values
//   p_s   (kTile, kKeyChunk)  scores, then probabilities of the chunk
//   acc_s (kTile, hd)    unnormalised output
//   m_s, l_s, alpha_s, pos_s (kTile)
#include <cmath>

#include "cuda_kernels.h"
#include "device_math.cuh"

namespace gb::cuda {
namespace {

constexpr int kTile = kPrefillTileTokens;
constexpr int kKeyChunk = 32;
constexpr int kThreads = 128;
constexpr int kRowThreads = kThreads / kTile;  // threads that share one query row's softmax update
static_assert(kRowThreads == 8 && kKeyChunk % kRowThreads == 0, "row groups are 8 lanes of one warp");

size_t shared_floats(int32_t hd) {
  return static_cast<size_t>(kTile) * hd * 2 + static_cast<size_t>(kKeyChunk) * hd * 2 +
         static_cast<size_t>(kTile) * kKeyChunk + 4 * kTile;
}

// grid (num_tiles, num_heads), block kThreads, dynamic shared memory shared_floats(hd).
__global__ void __launch_bounds__(kThreads)
    prefill_kernel(AttentionIo io, PagedKv kv, const int32_t* positions, const PrefillTile* tiles) {
  extern __shared__ float smem[];
  const int32_t hd = kv.head_dim, tid = threadIdx.x, h = blockIdx.y;
  float* q_s = smem;
  float* k_s = q_s + kTile * hd;
  float* v_s = k_s + kKeyChunk * hd;
  float* p_s = v_s + kKeyChunk * hd;
  float* acc_s = p_s + kTile * kKeyChunk;
  float* m_s = acc_s + kTile * hd;
  float* l_s = m_s + kTile;
  float* alpha_s = l_s + kTile;
  int32_t* pos_s = reinterpret_cast<int32_t*>(alpha_s + kTile);

  const PrefillTile tile = tiles[blockIdx.x];
  const int32_t kv_head = h / (io.num_heads / kv.num_kv_heads);
  const int32_t* table = kv.block_ids + kv.block_indptr[tile.seq];
  const int64_t kv_dim = int64_t{kv.num_kv_heads} * hd;
  const float scale = io.scale > 0.0f ? io.scale : 1.0f / sqrtf(static_cast<float>(hd));

  for (int32_t e = tid; e < kTile * hd; e += kThreads) {
    const int32_t r = e / hd, d = e % hd;
    const int64_t token = int64_t{tile.first_token} + r;
    q_s[e] = r < tile.num_tokens ? io.q[token * io.q_row_stride + int64_t{h} * hd + d] : 0.0f;
    acc_s[e] = 0.0f;
  }
  if (tid < kTile) {
    pos_s[tid] = tid < tile.num_tokens ? positions[tile.first_token + tid] : -1;
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.0f;
  }
  __syncthreads();
  int32_t kv_end = 0;  // one past the largest query position in the tile
  for (int32_t r = 0; r < tile.num_tokens; ++r) kv_end = max(kv_end, pos_s[r] + 1);
  // The first key any row's window reaches (no window: 0). Keys before it are
  // never loaded: their blocks may already be released.
  int32_t kv_first = 0;
  if (io.window > 0) {
    kv_first = kv_end;
    for (int32_t r = 0; r < tile.num_tokens; ++r) kv_first = min(kv_first, max(0, pos_s[r] - io.window + 1));
  }

  for (int32_t k0 = kv_first / kKeyChunk * kKeyChunk; k0 < kv_end; k0 += kKeyChunk) {
    for (int32_t e = tid; e < kKeyChunk * hd; e += kThreads) {
      const int32_t j = e / hd, d = e % hd, p = k0 + j;
      if (p >= kv_first && p < kv_end) {
        const int64_t slot = int64_t{table[p / kv.block_size]} * kv.block_size + p % kv.block_size;
        const int64_t at = slot * kv_dim + int64_t{kv_head} * hd + d;
        k_s[e] = detail::load_as_float(kv.k, at, kv.k_type);
        v_s[e] = detail::load_as_float(kv.v, at, kv.v_type);
      } else {
        k_s[e] = 0.0f;
        v_s[e] = 0.0f;
      }
    }
    __syncthreads();
    for (int32_t e = tid; e < kTile * kKeyChunk; e += kThreads) {
      const int32_t r = e / kKeyChunk, j = e % kKeyChunk;
      float score = -INFINITY;
      // Causal mask (padded rows have pos -1 and mask everything), then the window.
      if (k0 + j <= pos_s[r] && (io.window <= 0 || k0 + j > pos_s[r] - io.window)) {
        float dot = 0.0f;
        for (int32_t d = 0; d < hd; ++d) dot += q_s[r * hd + d] * k_s[j * hd + d];
        score = dot * scale;
        if (io.softcap > 0.0f) score = io.softcap * tanhf(score / io.softcap);
      }
      p_s[e] = score;
    }
    __syncthreads();
    {  // online softmax update: 8 consecutive lanes own one row
      const int32_t r = tid / kRowThreads, lane = tid % kRowThreads;
      const float m_old = m_s[r];
      float chunk_max = -INFINITY;
      for (int32_t j = lane; j < kKeyChunk; j += kRowThreads) chunk_max = fmaxf(chunk_max, p_s[r * kKeyChunk + j]);
      for (int off = kRowThreads / 2; off > 0; off >>= 1)
        chunk_max = fmaxf(chunk_max, __shfl_xor_sync(0xffffffffu, chunk_max, off));
      const float m_new = fmaxf(m_old, chunk_max);
      float chunk_sum = 0.0f;
      for (int32_t j = lane; j < kKeyChunk; j += kRowThreads) {
        const float s = p_s[r * kKeyChunk + j];
        const float pr = m_new == -INFINITY ? 0.0f : expf(s - m_new);  // expf(-inf) = 0 for masked keys
        p_s[r * kKeyChunk + j] = pr;
        chunk_sum += pr;
      }
      for (int off = kRowThreads / 2; off > 0; off >>= 1) chunk_sum += __shfl_xor_sync(0xffffffffu, chunk_sum, off);
      if (lane == 0) {
        const float alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
        alpha_s[r] = alpha;
        l_s[r] = l_s[r] * alpha + chunk_sum;
        m_s[r] = m_new;
      }
    }
    __syncthreads();
    for (int32_t e = tid; e < kTile * hd; e += kThreads) {
      const int32_t r = e / hd, d = e % hd;
      float a = acc_s[e] * alpha_s[r];
      for (int32_t j = 0; j < kKeyChunk; ++j) a += p_s[r * kKeyChunk + j] * v_s[j * hd + d];
      acc_s[e] = a;
    }
    __syncthreads();
  }

  for (int32_t e = tid; e < kTile * hd; e += kThreads) {
    const int32_t r = e / hd, d = e % hd;
    if (r >= tile.num_tokens) continue;
    const int64_t token = int64_t{tile.first_token} + r;
    io.out[token * int64_t{io.num_heads} * hd + int64_t{h} * hd + d] = acc_s[e] / l_s[r];
  }
}

}  // namespace

cudaError_t launch_paged_attention_prefill(const AttentionIo& io, const PagedKv& kv, const int32_t* positions,
                                           const PrefillTile* tiles, int32_t num_tiles, cudaStream_t stream) {
  if (num_tiles <= 0) return cudaSuccess;
  if (kv.head_dim <= 0 || kv.head_dim > kMaxHeadDim) return cudaErrorInvalidValue;
  const size_t smem_bytes = shared_floats(kv.head_dim) * sizeof(float);
  if (smem_bytes > 48 * 1024) {  // above the default limit the kernel must opt in
    const cudaError_t e = cudaFuncSetAttribute(prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem_bytes));
    if (e != cudaSuccess) return e;
  }
  prefill_kernel<<<dim3(static_cast<unsigned>(num_tiles), static_cast<unsigned>(io.num_heads)), kThreads, smem_bytes,
                   stream>>>(io, kv, positions, tiles);
  return cudaGetLastError();
}

}  // namespace gb::cuda
