// Embedding gather and float32 -> F16/BF16 activation casts: the two kernels
// that move data between storage types. Launchers are declared in cuda_kernels.h.
#include <algorithm>
#include <optional>

#include "cuda_kernels.h"
#include "device_math.cuh"

namespace gb::cuda {
namespace {

// grid (num_tokens), block 256: one block copies one embedding row.
__global__ void embedding_kernel(const int32_t* token_ids, const void* table, WeightType dtype, int32_t dim,
                                 float* out) {
  const int64_t t = blockIdx.x;
  const int64_t id = token_ids[t];
  const size_t elem_bytes = dtype == WeightType::F32 ? 4 : 2;
  const void* row = static_cast<const char*>(table) + static_cast<size_t>(id) * dim * elem_bytes;
  for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) out[t * dim + i] = detail::load_as_float(row, i, dtype);
}

__global__ void cast_f16_kernel(const float* x, int64_t n, __half* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = __float2half_rn(x[i]);
}

__global__ void cast_bf16_kernel(const float* x, int64_t n, __nv_bfloat16* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = __float2bfloat16_rn(x[i]);
}

}  // namespace

cudaError_t launch_embedding(const int32_t* token_ids, int32_t num_tokens, const void* table, WeightType dtype,
                             int32_t dim, float* out, cudaStream_t stream) {
  if (num_tokens <= 0) return cudaSuccess;
  if (kernels::is_quantized(dtype)) {
    const std::optional<size_t> row_bytes = kernels::weight_bytes(dtype, static_cast<uint64_t>(dim));
    if (!row_bytes) return cudaErrorInvalidValue;
    return launch_dequantize_gather(table, static_cast<int64_t>(*row_bytes), dtype, token_ids, num_tokens, dim, out,
                                    stream);
  }
  embedding_kernel<<<num_tokens, 256, 0, stream>>>(token_ids, table, dtype, dim, out);
  return cudaGetLastError();
}

cudaError_t launch_cast(const float* x, int64_t n, void* out, WeightType dtype, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 4096));
  switch (dtype) {
    case WeightType::F16: cast_f16_kernel<<<blocks, threads, 0, stream>>>(x, n, static_cast<__half*>(out)); break;
    case WeightType::BF16:
      cast_bf16_kernel<<<blocks, threads, 0, stream>>>(x, n, static_cast<__nv_bfloat16*>(out));
      break;
    case WeightType::F32:
      return cudaMemcpyAsync(out, x, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice, stream);
    default: return cudaErrorInvalidValue;  // quantized types are never cast targets
  }
  return cudaGetLastError();
}

}  // namespace gb::cuda
