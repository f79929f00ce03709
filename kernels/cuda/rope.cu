// Rotary position embedding (adjacent pairs with llama2.c's float arithmetic;
// the general form with NeoX pairs, frequency factors and scaling), and the
// KV-cache write of each new token's K and V rows into its paged slot.
#include "cuda_kernels.h"
#include "device_math.cuh"

namespace gb::cuda {
namespace {

// One thread per (token, head, pair). Accurate powf/cosf/sinf (no fast math), so
// the angles match a CPU float32 reference to a few ulp even at large positions.
__global__ void rope_kernel(float* x, int32_t num_tokens, int64_t row_stride, int32_t num_heads, int32_t head_dim,
                            int32_t rope_dim, float base, const int32_t* positions) {
  const int32_t num_pairs = rope_dim / 2;
  const int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t total = int64_t{num_tokens} * num_heads * num_pairs;
  if (idx >= total) return;
  const int32_t i = static_cast<int32_t>(idx % num_pairs);
  const int32_t h = static_cast<int32_t>((idx / num_pairs) % num_heads);
  const int64_t t = idx / (int64_t{num_pairs} * num_heads);
  // freq = 1 / base^(2i / rope_dim), written exactly as llama2.c's run.c (and
  // our CPU backend) computes it, so both round the same way.
  const float freq = 1.0f / powf(base, static_cast<float>(2 * i) / static_cast<float>(rope_dim));
  const float angle = static_cast<float>(positions[t]) * freq;
  const float c = cosf(angle), s = sinf(angle);
  float* pair = x + t * row_stride + int64_t{h} * head_dim + 2 * i;
  const float x0 = pair[0], x1 = pair[1];
  pair[0] = x0 * c - x1 * s;
  pair[1] = x0 * s + x1 * c;
}

// One thread per (token, head, pair), like rope_kernel; the angle is formed in
// double exactly as kernels/cpu rope_ex forms it, then rounded to float.
__global__ void rope_ex_kernel(float* x, int32_t num_tokens, int64_t row_stride, int32_t num_heads, int32_t head_dim,
                               RopeArgs a, const int32_t* positions) {
  const int32_t half = a.rope_dim / 2;
  const int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (idx >= int64_t{num_tokens} * num_heads * half) return;
  const int32_t i = static_cast<int32_t>(idx % half);
  const int32_t h = static_cast<int32_t>((idx / half) % num_heads);
  const int64_t t = idx / (int64_t{half} * num_heads);
  double inv_freq = pow(static_cast<double>(a.base), -2.0 * i / static_cast<double>(a.rope_dim));
  if (a.freq_factors != nullptr) inv_freq /= static_cast<double>(a.freq_factors[i]);
  const double angle = static_cast<double>(positions[t]) * inv_freq * static_cast<double>(a.freq_scale);
  const auto c = static_cast<float>(cos(angle) * static_cast<double>(a.attn_factor));
  const auto s = static_cast<float>(sin(angle) * static_cast<double>(a.attn_factor));
  float* head = x + t * row_stride + int64_t{h} * head_dim;
  float* p0 = head + (a.neox ? i : 2 * i);
  float* p1 = head + (a.neox ? i + half : 2 * i + 1);
  const float x0 = *p0, x1 = *p1;
  *p0 = x0 * c - x1 * s;
  *p1 = x0 * s + x1 * c;
}

// grid (num_tokens), block 128: copies one K row and one V row into the slot.
__global__ void kv_write_kernel(const float* k, const float* v, int64_t row_stride, int32_t kv_dim,
                                const int32_t* slot_mapping, void* k_cache, void* v_cache, WeightType k_type,
                                WeightType v_type) {
  const int64_t t = blockIdx.x;
  const int64_t slot = slot_mapping[t];
  for (int32_t i = threadIdx.x; i < kv_dim; i += blockDim.x) {
    detail::store_from_float(k_cache, slot * kv_dim + i, k_type, k[t * row_stride + i]);
    detail::store_from_float(v_cache, slot * kv_dim + i, v_type, v[t * row_stride + i]);
  }
}

}  // namespace

cudaError_t launch_rope(float* x, int32_t num_tokens, int64_t row_stride, int32_t num_heads, int32_t head_dim,
                        int32_t rope_dim, float base, const int32_t* positions, cudaStream_t stream) {
  const int64_t total = int64_t{num_tokens} * num_heads * (rope_dim / 2);
  if (total <= 0) return cudaSuccess;
  const int threads = 256;
  const auto blocks = static_cast<unsigned>((total + threads - 1) / threads);
  rope_kernel<<<blocks, threads, 0, stream>>>(x, num_tokens, row_stride, num_heads, head_dim, rope_dim, base,
                                              positions);
  return cudaGetLastError();
}

cudaError_t launch_rope_ex(float* x, int32_t num_tokens, int64_t row_stride, int32_t num_heads, int32_t head_dim,
                           const RopeArgs& args, const int32_t* positions, cudaStream_t stream) {
  const int64_t total = int64_t{num_tokens} * num_heads * (args.rope_dim / 2);
  if (total <= 0) return cudaSuccess;
  if (args.rope_dim > head_dim || args.rope_dim % 2 != 0) return cudaErrorInvalidValue;
  const int threads = 256;
  const auto blocks = static_cast<unsigned>((total + threads - 1) / threads);
  rope_ex_kernel<<<blocks, threads, 0, stream>>>(x, num_tokens, row_stride, num_heads, head_dim, args, positions);
  return cudaGetLastError();
}

bool kv_type_supported(WeightType type) { return type == WeightType::F32 || type == WeightType::F16 || type == WeightType::BF16; }

cudaError_t launch_kv_write(const float* k, const float* v, int64_t row_stride, int32_t num_tokens,
                            int32_t kv_dim, const int32_t* slot_mapping, void* k_cache, void* v_cache,
                            cudaStream_t stream, WeightType k_type, WeightType v_type) {
  if (num_tokens <= 0) return cudaSuccess;
  if (!kv_type_supported(k_type) || !kv_type_supported(v_type)) return cudaErrorInvalidValue;
  kv_write_kernel<<<num_tokens, 128, 0, stream>>>(k, v, row_stride, kv_dim, slot_mapping, k_cache, v_cache, k_type,
                                                  v_type);
  return cudaGetLastError();
}

}  // namespace gb::cuda
