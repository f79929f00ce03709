// Element-wise and per-row operations of the llama forward pass, float32.
// Scalar code written to match llama2.c run.c's arithmetic (the golden reference);
// the compiler vectorises the simple loops, SwiGLU has an explicit AVX2 path.
// Pure functions; any thread.
#pragma once

#include <cstdint>

namespace gb::kernels {

// out[i] = weight[i] * x[i] / sqrt(mean(x^2) + eps)        x, out, weight: (n)
void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps);

// Rotates adjacent pairs (v[2i], v[2i+1]) of the first rope_dim dimensions of each
// head by angle pos * base^(-2i / rope_dim).      v: (num_heads, head_dim)
// rope and rope_ex are the references (run.c's arithmetic; the general form):
// the CPU backend forms the angles once per step (rope_angles, rope_angles_ex
// below) and rotates with rope_rotate, tested equal to these bit for bit.
void rope(float* v, int32_t num_heads, int32_t head_dim, int32_t rope_dim, int32_t pos, float base);

// How a head's rotated dimensions are paired.
enum class RopeStyle {
  Adjacent,  // (v[2i], v[2i+1]): llama2.c, and GGUF llama files (their q/k rows are permuted to fit)
  NeoX,      // (v[i], v[i + rope_dim/2]): Qwen2/3, Gemma, Phi-3 (GPT-NeoX / HF rotate_half)
};

struct RopeParams {
  int32_t rope_dim = 0;                 // rotated dimensions per head (even, <= head_dim)
  float base = 10000.0f;
  RopeStyle style = RopeStyle::Adjacent;
  // (rope_dim/2) divisors of each pair's frequency, or null: Llama-3.1's
  // rope_freqs tensor (its "llama3" rope scaling), Phi-3's long/short factors.
  const float* freq_factors = nullptr;
  float freq_scale = 1.0f;   // linear scaling: the angle is multiplied by this (Gemma 3 global layers)
  float attn_factor = 1.0f;  // cos and sin are multiplied by this (Phi-3 LongRoPE)
};

// General RoPE: pair i (0 <= i < rope_dim/2) turns by pos * base^(-2i/rope_dim) /
// freq_factors[i]. The angle is formed in double precision.  v: (num_heads, head_dim)
void rope_ex(float* v, int32_t num_heads, int32_t head_dim, int32_t pos, const RopeParams& p);

// The cos and sin of one position's rope_dim/2 pair angles, exactly as rope()
// (float arithmetic of run.c; adjacent pairs) and rope_ex() form them, so a
// caller can work them out once per position and rotate every layer's q and k
// with rope_rotate(): the same bits as rope() / rope_ex().   cos, sin: (rope_dim/2)
void rope_angles(int32_t pos, float base, int32_t rope_dim, float* cos, float* sin);
void rope_angles_ex(int32_t pos, const RopeParams& p, float* cos, float* sin);
// Rotates the pairs of each head by the given angles.   v: (num_heads, head_dim)
void rope_rotate(float* v, int32_t num_heads, int32_t head_dim, int32_t rope_dim, RopeStyle style, const float* cos,
                 const float* sin);

// out[i] = silu(gate[i]) * up[i]                     gate, up, out: (n)
// Uses an AVX2 path (polynomial exp, < 1e-6 relative from the reference) when
// the CPU has it; swiglu_reference is the scalar oracle.
void swiglu(float* out, const float* gate, const float* up, int64_t n);
void swiglu_reference(float* out, const float* gate, const float* up, int64_t n);

// out[i] = gelu_tanh(gate[i]) * up[i], GELU with the tanh approximation:
// 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).   gate, up, out: (n)
void gelu_tanh_gated(float* out, const float* gate, const float* up, int64_t n);

// gpt-oss's clamped SwiGLU: g = min(gate[i], 7), u = clamp(up[i], -7, 7),
// out[i] = (u + 1) * g * sigmoid(1.702 g)  (the model's fixed alpha and limit).
// gate, up, out: (n); out may be gate.
void swiglu_oai(float* out, const float* gate, const float* up, int64_t n);
inline constexpr float kSwigluOaiAlpha = 1.702f;
inline constexpr float kSwigluOaiLimit = 7.0f;

// A gated activation's kernel (the backends pick one per FFN activation).
using GatedActivationFn = void (*)(float* out, const float* gate, const float* up, int64_t n);

// x[i] = cap * tanh(x[i] / cap)                        (n)
void softcap_inplace(float* x, int64_t n, float cap);

// x[i] += y[i]                                        (n)
void add_inplace(float* x, const float* y, int64_t n);

// In-place numerically stable softmax.                 (n)
void softmax_inplace(float* x, int64_t n);

}  // namespace gb::kernels
