// Quantized weights on the GPU, dequantized on the fly (block layouts in
// kernels/cpu/quant_blocks.h; the same formulas as the CPU reference in
// kernels/cpu/dequantize.cpp). Activations stay float32 (no 8-bit rounding).
//
// GEMV (decode and small batches, num_tokens <= kMaxGemvTokens): one warp per
// weight row; lane l decodes value l of every 32-value group of the row, so a
// group is one coalesced pass, and each decoded weight is multiplied with every
// token's activation before the next group; a warp reduction ends the row.
// Prefill: launch_dequantize_rows turns a tile of rows into float32 for cuBLAS
// (engine/backend/cuda/cuda_gemm.cpp: gemm_quant_rows); with a row-id list the
// same kernel gathers embedding rows.
//
// Which types have kernels is data: kQuantKernels has one row per weight type
// (indexed by the WeightType value), null for the float types and the types
// without CUDA kernels (MXFP4).
#include <cuda_fp16.h>

#include "cuda/cuda_kernels.h"
#include "cuda/device_math.cuh"

namespace gb::cuda {

namespace {

using kernels::WeightType;

__device__ __forceinline__ float half_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(p[0] | (p[1] << 8))));
}

__device__ __constant__ int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

__device__ __forceinline__ void k4_scale_min(int j, const uint8_t* s, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Value l (0..31) of 32-value group g of a row, for weight type T.
template <WeightType T>
__device__ __forceinline__ float group_value(const uint8_t* row, int64_t g, int l) {
  if constexpr (T == WeightType::Q8_0) {
    const uint8_t* b = row + g * 34;
    return half_at(b) * static_cast<float>(static_cast<int8_t>(b[2 + l]));
  } else if constexpr (T == WeightType::Q4_0 || T == WeightType::IQ4_NL) {
    const uint8_t* b = row + g * 18;
    const int nib = l < 16 ? (b[2 + l] & 0xF) : (b[2 + l - 16] >> 4);
    if constexpr (T == WeightType::Q4_0) return static_cast<float>(nib - 8) * half_at(b);
    else return half_at(b) * static_cast<float>(kIq4nl[nib]);
  } else if constexpr (T == WeightType::Q4_1) {
    const uint8_t* b = row + g * 20;
    const int nib = l < 16 ? (b[4 + l] & 0xF) : (b[4 + l - 16] >> 4);
    return static_cast<float>(nib) * half_at(b) + half_at(b + 2);
  } else if constexpr (T == WeightType::Q5_0 || T == WeightType::Q5_1) {
    constexpr int kBytes = T == WeightType::Q5_0 ? 22 : 24, kQh = T == WeightType::Q5_0 ? 2 : 4;
    const uint8_t* b = row + g * kBytes;
    const int nib = l < 16 ? (b[kQh + 4 + l] & 0xF) : (b[kQh + 4 + l - 16] >> 4);
    const int q = nib | (((b[kQh + l / 8] >> (l % 8)) & 1) << 4);
    if constexpr (T == WeightType::Q5_0) return static_cast<float>(q - 16) * half_at(b);
    else return static_cast<float>(q) * half_at(b) + half_at(b + 2);
  } else {
    // K-types and IQ4_XS: 256-value super-blocks of 8 groups.
    const int gg = static_cast<int>(g % 8);
    if constexpr (T == WeightType::Q4_K || T == WeightType::Q5_K) {
      constexpr bool kFifth = T == WeightType::Q5_K;
      const uint8_t* b = row + (g / 8) * (kFifth ? 176 : 144);
      int sc, m;
      k4_scale_min(gg, b + 4, sc, m);
      int q = (b[(kFifth ? 48 : 16) + 32 * (gg / 2) + l] >> (4 * (gg % 2))) & 0xF;
      if constexpr (kFifth) q |= ((b[16 + l] >> gg) & 1) << 4;
      return half_at(b) * static_cast<float>(sc) * static_cast<float>(q) - half_at(b + 2) * static_cast<float>(m);
    } else if constexpr (T == WeightType::Q6_K) {
      const uint8_t* b = row + (g / 8) * 210;
      const int h = gg / 4, k = gg % 4;
      const int lo = b[64 * h + 32 * (k & 1) + l];
      const int q = ((k < 2 ? lo & 0xF : lo >> 4) | (((b[128 + 32 * h + l] >> (2 * k)) & 3) << 4)) - 32;
      return half_at(b + 208) * static_cast<float>(static_cast<int8_t>(b[192 + 2 * gg + l / 16])) *
             static_cast<float>(q);
    } else if constexpr (T == WeightType::Q2_K) {
      const uint8_t* b = row + (g / 8) * 84;
      const uint8_t sc = b[2 * gg + l / 16];
      const int q = (b[16 + 32 * (gg / 4) + l] >> (2 * (gg % 4))) & 3;
      return half_at(b + 80) * static_cast<float>(sc & 0xF) * static_cast<float>(q) -
             half_at(b + 82) * static_cast<float>(sc >> 4);
    } else if constexpr (T == WeightType::Q3_K) {
      const uint8_t* b = row + (g / 8) * 110;
      const int j = 2 * gg + l / 16;
      const uint8_t* s = b + 96;
      const int sc = ((j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4)) | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
      const int q = ((b[32 + 32 * (gg / 4) + l] >> (2 * (gg % 4))) & 3) - (((b[l] >> gg) & 1) ? 0 : 4);
      return half_at(b + 108) * static_cast<float>(sc) * static_cast<float>(q);
    } else {  // IQ4_XS
      const uint8_t* b = row + (g / 8) * 136;
      const int scales_h = b[2] | (b[3] << 8);
      const int ls = ((b[4 + gg / 2] >> (4 * (gg % 2))) & 0xF) | (((scales_h >> (2 * gg)) & 3) << 4);
      const int byte = b[8 + 16 * gg + (l & 15)];
      return half_at(b) * static_cast<float>(ls - 32) * static_cast<float>(kIq4nl[l < 16 ? byte & 0xF : byte >> 4]);
    }
  }
}

constexpr int kWarpsPerBlock = 8;

template <WeightType T>
__global__ void quant_gemv_kernel(const uint8_t* w, int64_t row_stride, int64_t rows, int64_t cols, const float* x,
                                  int32_t num_tokens, float* y, int64_t ldy, float beta) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = threadIdx.x % 32;
  const uint8_t* row = w + r * row_stride;
  float acc[kMaxGemvTokens];
#pragma unroll
  for (int t = 0; t < kMaxGemvTokens; ++t) acc[t] = 0.0f;
  for (int64_t g = 0; g < cols / 32; ++g) {
    const float v = group_value<T>(row, g, lane);
#pragma unroll
    for (int t = 0; t < kMaxGemvTokens; ++t)
      if (t < num_tokens) acc[t] += v * x[t * cols + g * 32 + lane];
  }
#pragma unroll
  for (int t = 0; t < kMaxGemvTokens; ++t) {
    if (t >= num_tokens) break;
    const float s = detail::warp_sum(acc[t]);
    if (lane == 0) y[t * ldy + r] = beta == 0.0f ? s : s + beta * y[t * ldy + r];
  }
}

template <WeightType T>
__global__ void dequantize_rows_kernel(const uint8_t* w, int64_t row_stride, int64_t row_begin,
                                       const int32_t* row_ids, int64_t num_rows, int64_t cols, float* out) {
  const int64_t groups = cols / 32;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; i < num_rows * groups;
       i += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t r = i / groups, g = i % groups;
    const int64_t src = row_ids != nullptr ? row_ids[r] : row_begin + r;
    out[r * cols + g * 32 + threadIdx.x] = group_value<T>(w + src * row_stride, g, threadIdx.x);
  }
}

using GemvKernel = void (*)(const uint8_t*, int64_t, int64_t, int64_t, const float*, int32_t, float*, int64_t, float);
using DequantizeKernel = void (*)(const uint8_t*, int64_t, int64_t, const int32_t*, int64_t, int64_t, float*);

struct QuantKernels {
  GemvKernel gemv = nullptr;
  DequantizeKernel dequantize = nullptr;
};

template <WeightType T>
constexpr QuantKernels kernels_of() {
  return {&quant_gemv_kernel<T>, &dequantize_rows_kernel<T>};
}

// One row per WeightType, in enum order; the float types have no row.
const QuantKernels kQuantKernels[kernels::kNumWeightTypes] = {
    {}, {}, {},  // F32, F16, BF16: cuBLAS (cuda_gemm.cpp)
    kernels_of<WeightType::Q4_0>(), kernels_of<WeightType::Q4_1>(), kernels_of<WeightType::Q5_0>(),
    kernels_of<WeightType::Q5_1>(), kernels_of<WeightType::Q8_0>(), kernels_of<WeightType::Q2_K>(),
    kernels_of<WeightType::Q3_K>(), kernels_of<WeightType::Q4_K>(), kernels_of<WeightType::Q5_K>(),
    kernels_of<WeightType::Q6_K>(), kernels_of<WeightType::IQ4_NL>(), kernels_of<WeightType::IQ4_XS>(),
    {},  // MXFP4: no kernels yet; check_weight_types refuses such a model (--device auto runs it on the CPU)
    {}, {}, {},  // Q4_K_R, Q5_K_R, Q6_K_R: CPU layouts, never uploaded (the CUDA backend reads the file types)
};
static_assert(kernels::kNumWeightTypes == 19, "a new weight type needs its row in kQuantKernels");

const QuantKernels* kernels_for(WeightType t) {
  const auto i = static_cast<size_t>(t);
  if (i >= static_cast<size_t>(kernels::kNumWeightTypes) || kQuantKernels[i].gemv == nullptr) return nullptr;
  return &kQuantKernels[i];
}

unsigned dequantize_blocks(int64_t num_rows, int64_t cols) {
  const int64_t work = num_rows * (cols / 32);
  return static_cast<unsigned>(work / 8 + 1 < 65535 ? work / 8 + 1 : 65535);
}

// A shape the kernels cannot walk: rows of whole blocks only.
bool bad_cols(WeightType t, int64_t cols) {
  return cols <= 0 || cols % 32 != 0 || cols % kernels::weight_traits(t).block_elements != 0;
}

}  // namespace

bool quant_kernels_support(WeightType t) { return kernels_for(t) != nullptr; }

cudaError_t launch_quant_gemv(const void* w, int64_t row_stride_bytes, WeightType type, int64_t rows, int64_t cols,
                              const float* x, int32_t num_tokens, float* y, int64_t ldy, float beta,
                              cudaStream_t stream) {
  const QuantKernels* k = kernels_for(type);
  if (k == nullptr || num_tokens > kMaxGemvTokens || bad_cols(type, cols)) return cudaErrorInvalidValue;
  if (rows <= 0 || num_tokens <= 0) return cudaSuccess;
  const auto blocks = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  k->gemv<<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(static_cast<const uint8_t*>(w), row_stride_bytes, rows, cols, x,
                                                      num_tokens, y, ldy, beta);
  return cudaGetLastError();
}

cudaError_t launch_dequantize_rows(const void* w, int64_t row_stride_bytes, WeightType type, int64_t row_begin,
                                   int64_t num_rows, int64_t cols, float* out, cudaStream_t stream) {
  const QuantKernels* k = kernels_for(type);
  if (k == nullptr || bad_cols(type, cols)) return cudaErrorInvalidValue;
  if (num_rows <= 0) return cudaSuccess;
  k->dequantize<<<dequantize_blocks(num_rows, cols), dim3(32, 8), 0, stream>>>(
      static_cast<const uint8_t*>(w), row_stride_bytes, row_begin, nullptr, num_rows, cols, out);
  return cudaGetLastError();
}

cudaError_t launch_dequantize_gather(const void* w, int64_t row_stride_bytes, WeightType type, const int32_t* row_ids,
                                     int64_t num_rows, int64_t cols, float* out, cudaStream_t stream) {
  const QuantKernels* k = kernels_for(type);
  if (k == nullptr || bad_cols(type, cols) || row_ids == nullptr) return cudaErrorInvalidValue;
  if (num_rows <= 0) return cudaSuccess;
  k->dequantize<<<dequantize_blocks(num_rows, cols), dim3(32, 8), 0, stream>>>(
      static_cast<const uint8_t*>(w), row_stride_bytes, 0, row_ids, num_rows, cols, out);
  return cudaGetLastError();
}

}  // namespace gb::cuda
