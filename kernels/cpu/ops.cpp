#include "cpu/ops.h"

#include <algorithm>
#include <cmath>

#include "cpu/matmul.h"

namespace gb::kernels {

void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  ss /= static_cast<float>(n);
  ss += eps;
  ss = 1.0f / std::sqrt(ss);
  for (int64_t i = 0; i < n; ++i) out[i] = weight[i] * (ss * x[i]);
}

void rope(float* v, int32_t num_heads, int32_t head_dim, int32_t rope_dim, int32_t pos, float base) {
  for (int32_t i = 0; i < rope_dim; i += 2) {
    // Same float arithmetic as run.c: freq = 1 / base^(i / rope_dim).
    const float freq = 1.0f / std::pow(base, static_cast<float>(i) / static_cast<float>(rope_dim));
    const float angle = static_cast<float>(pos) * freq;
    const float c = std::cos(angle);
    const float s = std::sin(angle);
    for (int32_t h = 0; h < num_heads; ++h) {
      float* p = v + static_cast<int64_t>(h) * head_dim + i;
      const float x0 = p[0];
      const float x1 = p[1];
      p[0] = x0 * c - x1 * s;
      p[1] = x0 * s + x1 * c;
    }
  }
}

void rope_ex(float* v, int32_t num_heads, int32_t head_dim, int32_t pos, const RopeParams& p) {
  const int32_t half = p.rope_dim / 2;
  for (int32_t i = 0; i < half; ++i) {
    double inv_freq = std::pow(static_cast<double>(p.base), -2.0 * i / static_cast<double>(p.rope_dim));
    if (p.freq_factors != nullptr) inv_freq /= static_cast<double>(p.freq_factors[i]);
    const double angle = static_cast<double>(pos) * inv_freq * static_cast<double>(p.freq_scale);
    const auto c = static_cast<float>(std::cos(angle) * static_cast<double>(p.attn_factor));
    const auto s = static_cast<float>(std::sin(angle) * static_cast<double>(p.attn_factor));
    // Offsets of the pair's two members inside a head.
    const int32_t a = p.style == RopeStyle::Adjacent ? 2 * i : i;
    const int32_t b = p.style == RopeStyle::Adjacent ? 2 * i + 1 : i + half;
    for (int32_t h = 0; h < num_heads; ++h) {
      float* head = v + static_cast<int64_t>(h) * head_dim;
      const float x0 = head[a];
      const float x1 = head[b];
      head[a] = x0 * c - x1 * s;
      head[b] = x0 * s + x1 * c;
    }
  }
}

void rope_angles(int32_t pos, float base, int32_t rope_dim, float* cos, float* sin) {
  for (int32_t i = 0; i < rope_dim; i += 2) {
    const float freq = 1.0f / std::pow(base, static_cast<float>(i) / static_cast<float>(rope_dim));
    const float angle = static_cast<float>(pos) * freq;
    cos[i / 2] = std::cos(angle);
    sin[i / 2] = std::sin(angle);
  }
}

void rope_angles_ex(int32_t pos, const RopeParams& p, float* cos, float* sin) {
  const int32_t half = p.rope_dim / 2;
  for (int32_t i = 0; i < half; ++i) {
    double inv_freq = std::pow(static_cast<double>(p.base), -2.0 * i / static_cast<double>(p.rope_dim));
    if (p.freq_factors != nullptr) inv_freq /= static_cast<double>(p.freq_factors[i]);
    const double angle = static_cast<double>(pos) * inv_freq * static_cast<double>(p.freq_scale);
    cos[i] = static_cast<float>(std::cos(angle) * static_cast<double>(p.attn_factor));
    sin[i] = static_cast<float>(std::sin(angle) * static_cast<double>(p.attn_factor));
  }
}

void rope_rotate(float* v, int32_t num_heads, int32_t head_dim, int32_t rope_dim, RopeStyle style, const float* cos,
                 const float* sin) {
  const int32_t half = rope_dim / 2;
  for (int32_t h = 0; h < num_heads; ++h) {
    float* head = v + static_cast<int64_t>(h) * head_dim;
    for (int32_t i = 0; i < half; ++i) {
      const int32_t a = style == RopeStyle::Adjacent ? 2 * i : i;
      const int32_t b = style == RopeStyle::Adjacent ? 2 * i + 1 : i + half;
      const float x0 = head[a];
      const float x1 = head[b];
      head[a] = x0 * cos[i] - x1 * sin[i];
      head[b] = x0 * sin[i] + x1 * cos[i];
    }
  }
}

namespace avx2 {
void swiglu(float* out, const float* gate, const float* up, int64_t n);
}

void swiglu(float* out, const float* gate, const float* up, int64_t n) {
#if defined(__x86_64__)
  if (matmul_has_simd()) {
    avx2::swiglu(out, gate, up, n);
    return;
  }
#endif
  swiglu_reference(out, gate, up, n);
}

void swiglu_reference(float* out, const float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g * (1.0f / (1.0f + std::exp(-g))) * up[i];
  }
}

void gelu_tanh_gated(float* out, const float* gate, const float* up, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
  }
}

void swiglu_oai(float* out, const float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], kSwigluOaiLimit);
    const float u = std::clamp(up[i], -kSwigluOaiLimit, kSwigluOaiLimit);
    out[i] = (u + 1.0f) * (g / (1.0f + std::exp(-kSwigluOaiAlpha * g)));
  }
}

void softcap_inplace(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void add_inplace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void softmax_inplace(float* x, int64_t n) {
  if (n <= 0) return;
  float max_val = x[0];
  for (int64_t i = 1; i < n; ++i) max_val = x[i] > max_val ? x[i] : max_val;
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_val);
    sum += x[i];
  }
  for (int64_t i = 0; i < n; ++i) x[i] /= sum;
}

}  // namespace gb::kernels
