// On-device summary of logit rows for the token inspector: top-N (id, logit),
// the log-softmax normaliser and the entropy, so a step copies
// O(num_rows * top_n) values back instead of whole vocabulary rows.
//
// Order: descending logit, ties broken by lower id, NaN logits ignored. Top-N
// is found by top_n rounds of a block-wide arg-max over the entries that rank
// strictly after the previous pick, which needs no sort and no extra memory;
// top_n is small (<= kMaxTopN) next to the vocabulary.
#include <climits>
#include <cmath>

#include "cuda_kernels.h"
#include "device_math.cuh"

namespace gb::cuda {
namespace {

constexpr int kThreads = 1024;

struct Pick {
  float value;
  int32_t id;
};

// True when a ranks before b.
__device__ __forceinline__ bool before(Pick a, Pick b) {
  return a.value > b.value || (a.value == b.value && a.id < b.id);
}

__device__ Pick block_best(Pick p, Pick* scratch) {
  for (int off = 16; off > 0; off >>= 1) {
    const Pick other{__shfl_xor_sync(0xffffffffu, p.value, off), __shfl_xor_sync(0xffffffffu, p.id, off)};
    if (before(other, p)) p = other;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = p;
  __syncthreads();
  p = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : Pick{-INFINITY, INT_MAX};
  for (int off = 16; off > 0; off >>= 1) {
    const Pick other{__shfl_xor_sync(0xffffffffu, p.value, off), __shfl_xor_sync(0xffffffffu, p.id, off)};
    if (before(other, p)) p = other;
  }
  return p;
}

// grid (num_rows), block kThreads.
__global__ void __launch_bounds__(kThreads)
    logits_summary_kernel(const float* logits, int32_t vocab, int32_t top_n, int32_t* top_ids, float* top_logits,
                          float* log_normalizer, float* entropy) {
  __shared__ float red[32];
  __shared__ Pick pick_scratch[32];
  const int64_t r = blockIdx.x;
  const float* row = logits + r * vocab;

  float local_max = -INFINITY;
  for (int32_t i = threadIdx.x; i < vocab; i += kThreads)
    if (!isnan(row[i])) local_max = fmaxf(local_max, row[i]);
  const float mx = detail::block_max(local_max, red);
  // Z = sum exp(l - mx); H = log Z - sum exp(l - mx) (l - mx) / Z, which avoids
  // subtracting two large numbers.
  float local_z = 0.0f, local_el = 0.0f;
  for (int32_t i = threadIdx.x; i < vocab; i += kThreads) {
    if (isnan(row[i]) || row[i] == -INFINITY) continue;
    const float shifted = row[i] - mx;
    const float e = expf(shifted);
    local_z += e;
    local_el += e * shifted;
  }
  const float z = detail::block_sum(local_z, red);
  const float el = detail::block_sum(local_el, red);
  if (threadIdx.x == 0) {
    log_normalizer[r] = mx + logf(z);
    entropy[r] = logf(z) - el / z;
  }

  Pick prev{INFINITY, -1};
  for (int32_t k = 0; k < top_n; ++k) {
    Pick best{-INFINITY, INT_MAX};
    for (int32_t i = threadIdx.x; i < vocab; i += kThreads) {
      const Pick cand{row[i], i};
      if (isnan(cand.value) || !before(prev, cand)) continue;
      if (before(cand, best)) best = cand;
    }
    best = block_best(best, pick_scratch);
    if (threadIdx.x == 0) {
      const bool found = best.id != INT_MAX;
      top_ids[r * top_n + k] = found ? best.id : -1;
      top_logits[r * top_n + k] = found ? best.value : -INFINITY;
    }
    if (best.id == INT_MAX) {  // fewer candidates than top_n: pad the rest
      for (int32_t rest = k + 1 + threadIdx.x; rest < top_n; rest += kThreads) {
        top_ids[r * top_n + rest] = -1;
        top_logits[r * top_n + rest] = -INFINITY;
      }
      break;
    }
    prev = best;
  }
}

}  // namespace

cudaError_t launch_logits_summary(const float* logits, int32_t num_rows, int32_t vocab, int32_t top_n,
                                  int32_t* top_ids, float* top_logits, float* log_normalizer, float* entropy,
                                  cudaStream_t stream) {
  if (num_rows <= 0) return cudaSuccess;
  if (top_n < 0 || top_n > kMaxTopN || vocab <= 0) return cudaErrorInvalidValue;
  logits_summary_kernel<<<num_rows, kThreads, 0, stream>>>(logits, vocab, top_n, top_ids, top_logits,
                                                           log_normalizer, entropy);
  return cudaGetLastError();
}

}  // namespace gb::cuda
