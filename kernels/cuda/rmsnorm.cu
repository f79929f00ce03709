// RMSNorm over rows of float32 activations, optionally gathering rows through
// an index (the final norm runs only on the rows whose logits are wanted), and
// per-head RMSNorm of q/k slices in place.
#include "cuda_kernels.h"
#include "device_math.cuh"

namespace gb::cuda {
namespace {

// grid (num_rows), block 256: one block normalises one row; F32 sum of squares.
__global__ void rmsnorm_kernel(const float* x, const int32_t* row_index, int32_t dim, const float* weight,
                               float eps, float* out) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const int64_t src = row_index ? row_index[r] : r;
  const float* xr = x + src * dim;
  float ss = 0.0f;
  for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
  ss = detail::block_sum(ss, scratch);
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
  for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) out[r * dim + i] = weight[i] * (scale * xr[i]);
}

// grid (num_tokens * num_heads), block 128: one block normalises one head slice
// in place (every thread reads its elements before the reduction and writes the
// same elements after it).
__global__ void head_rmsnorm_kernel(float* x, int64_t row_stride, int32_t num_heads, int32_t head_dim,
                                    const float* weight, float eps) {
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x / num_heads, h = blockIdx.x % num_heads;
  float* xr = x + t * row_stride + h * head_dim;
  float ss = 0.0f;
  for (int32_t i = threadIdx.x; i < head_dim; i += blockDim.x) ss += xr[i] * xr[i];
  ss = detail::block_sum(ss, scratch);
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(head_dim) + eps);
  for (int32_t i = threadIdx.x; i < head_dim; i += blockDim.x) xr[i] = weight[i] * (scale * xr[i]);
}

}  // namespace

cudaError_t launch_head_rmsnorm(float* x, int32_t num_tokens, int64_t row_stride, int32_t num_heads,
                                int32_t head_dim, const float* weight, float eps, cudaStream_t stream) {
  const int64_t blocks = int64_t{num_tokens} * num_heads;
  if (blocks <= 0) return cudaSuccess;
  head_rmsnorm_kernel<<<static_cast<unsigned>(blocks), 128, 0, stream>>>(x, row_stride, num_heads, head_dim, weight,
                                                                          eps);
  return cudaGetLastError();
}

cudaError_t launch_rmsnorm(const float* x, const int32_t* row_index, int32_t num_rows, int32_t dim,
                           const float* weight, float eps, float* out, cudaStream_t stream) {
  if (num_rows <= 0) return cudaSuccess;
  rmsnorm_kernel<<<num_rows, 256, 0, stream>>>(x, row_index, dim, weight, eps, out);
  return cudaGetLastError();
}

}  // namespace gb::cuda
