// Device helpers shared by the .cu files: element loads from F32/F16/BF16
// storage, and block-wide reductions. Header-only, device code only.
// Invariant: block reductions are called by every thread of the block and use a
// caller-provided shared scratch of at least 32 floats.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/cuda_kernels.h"

namespace gb::cuda::detail {

// Element i of a row stored as `dtype`, widened to float exactly.
__device__ __forceinline__ float load_as_float(const void* row, int64_t i, WeightType dtype) {
  switch (dtype) {
    case WeightType::F16: return __half2float(static_cast<const __half*>(row)[i]);
    case WeightType::BF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(row)[i]);
    default: break;  // F32 (quantized types never reach this loader)
  }
  return static_cast<const float*>(row)[i];
}

// Stores x as element i of a row of `dtype` (F32, F16 or BF16; rounded to nearest even).
__device__ __forceinline__ void store_from_float(void* row, int64_t i, WeightType dtype, float x) {
  switch (dtype) {
    case WeightType::F16: static_cast<__half*>(row)[i] = __float2half_rn(x); return;
    case WeightType::BF16: static_cast<__nv_bfloat16*>(row)[i] = __float2bfloat16_rn(x); return;
    default: break;
  }
  static_cast<float*>(row)[i] = x;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block; every thread receives the result. scratch: >= 32 floats.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int num_warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < num_warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

// Max over the block; every thread receives the result. scratch: >= 32 floats.
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int num_warps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < num_warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

}  // namespace gb::cuda::detail
