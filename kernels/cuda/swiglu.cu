// Gated activations of the fused gate/up projection: out = act(gate) * up with
// SiLU (SwiGLU) or GELU-tanh (GeGLU).
#include <algorithm>

#include "cuda_kernels.h"

namespace gb::cuda {
namespace {

__global__ void gated_kernel(const float* gate_up, int32_t num_tokens, int32_t hidden, GatedAct act, float* out) {
  const int64_t total = int64_t{num_tokens} * hidden;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = idx / hidden, i = idx % hidden;
    const float g = gate_up[t * 2 * hidden + i];
    const float u = gate_up[t * 2 * hidden + hidden + i];
    if (act == GatedAct::GeluTanh) {
      // kernels/cpu gelu_tanh_gated's arithmetic; tanhf (not a fast intrinsic).
      constexpr float kSqrt2OverPi = 0.7978845608028654f;
      out[idx] = 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * u;
    } else {
      // silu(g) = g * sigmoid(g); expf (not __expf) keeps it within ulps of the CPU.
      out[idx] = g / (1.0f + expf(-g)) * u;
    }
  }
}

}  // namespace

cudaError_t launch_swiglu(const float* gate_up, int32_t num_tokens, int32_t hidden, float* out,
                          cudaStream_t stream) {
  return launch_gated_activation(gate_up, num_tokens, hidden, GatedAct::SiLU, out, stream);
}

cudaError_t launch_gated_activation(const float* gate_up, int32_t num_tokens, int32_t hidden, GatedAct act,
                                    float* out, cudaStream_t stream) {
  const int64_t total = int64_t{num_tokens} * hidden;
  if (total <= 0) return cudaSuccess;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((total + threads - 1) / threads, 8192));
  gated_kernel<<<blocks, threads, 0, stream>>>(gate_up, num_tokens, hidden, act, out);
  return cudaGetLastError();
}

}  // namespace gb::cuda
