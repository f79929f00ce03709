// Element-wise steps of the layer recipe: bias rows (on strided views), the
// residual add, scaling (Gemma's embedding scale) and soft-capping (final logits).
#include <algorithm>

#include "cuda_kernels.h"

namespace gb::cuda {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 8192)); }

__global__ void add_bias_kernel(float* x, int32_t num_rows, int64_t row_stride, int32_t width, const float* bias) {
  const int64_t total = int64_t{num_rows} * width;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = idx / width, i = idx % width;
    x[t * row_stride + i] += bias[i];
  }
}

__global__ void add_kernel(float* x, const float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    x[i] += y[i];
}

__global__ void scale_kernel(float* x, int64_t n, float factor) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    x[i] *= factor;
}

__global__ void softcap_kernel(float* x, int64_t n, float cap) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    x[i] = cap * tanhf(x[i] / cap);
}

}  // namespace

cudaError_t launch_add_bias(float* x, int32_t num_rows, int64_t row_stride, int32_t width, const float* bias,
                            cudaStream_t stream) {
  const int64_t total = int64_t{num_rows} * width;
  if (total <= 0) return cudaSuccess;
  add_bias_kernel<<<grid_for(total), kThreads, 0, stream>>>(x, num_rows, row_stride, width, bias);
  return cudaGetLastError();
}

cudaError_t launch_add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  add_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t launch_scale(float* x, int64_t n, float factor, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  scale_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n, factor);
  return cudaGetLastError();
}

cudaError_t launch_softcap(float* x, int64_t n, float cap, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (!(cap > 0.0f)) return cudaErrorInvalidValue;
  softcap_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n, cap);
  return cudaGetLastError();
}

}  // namespace gb::cuda
