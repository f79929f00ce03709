// The architecture table (see architecture.h).
#include "model/architecture.h"

namespace gb {

const std::vector<ArchitectureSpec>& architectures() {
  static const std::vector<ArchitectureSpec> rows = {
      {.name = "llama", .rope_style = RopeStyle::Adjacent, .rope_freqs = true,
       .summary = "Llama 1/2/3.x, Mistral/Ministral: RMSNorm, SwiGLU, RoPE on adjacent pairs (GGUF permutes q/k), "
                  "optional rope_freqs (Llama-3.1 scaling) and attention.sliding_window (every layer)"},
      {.name = "qwen2", .rope_style = RopeStyle::NeoX, .qkv_bias = true,
       .summary = "Qwen2 / Qwen2.5: llama block with q/k/v biases and NeoX RoPE"},
      {.name = "qwen3", .rope_style = RopeStyle::NeoX, .qk_norm = true,
       .summary = "Qwen3: NeoX RoPE, per-head RMSNorm on q and k, explicit head_dim, no biases"},
      {.name = "gemma2", .rope_style = RopeStyle::NeoX, .post_norms = true, .embed_scale_sqrt_dim = true,
       .activation = FfnActivation::GeluTanh, .swa_pattern = 2, .default_sliding_window = 4096, .layers_27b = 46,
       .summary = "Gemma 2: GELU-tanh gated FFN, (1+w) RMSNorm (stored with the 1 added), post-attention and "
                  "post-FFN norms, embeddings x sqrt(dim), attention and final soft-caps, sliding window on even layers"},
      {.name = "gemma3", .rope_style = RopeStyle::NeoX, .qk_norm = true, .post_norms = true,
       .embed_scale_sqrt_dim = true, .activation = FfnActivation::GeluTanh, .swa_pattern = 6,
       .rope_freq_base_swa = 10000.0f, .layers_27b = 62,
       .summary = "Gemma 3 (text): Gemma 2's block with q/k norms, five sliding layers per global one, local RoPE "
                  "base 10000 and the file's global base (linear scaling on global layers)"},
      {.name = "phi3", .rope_style = RopeStyle::NeoX, .fused_qkv = true, .fused_gate_up = true,
       .rope_long_short = true,
       .summary = "Phi-3 / Phi-4-mini: fused attn_qkv and gate/up, NeoX RoPE, LongRoPE long/short factors "
                  "(128k variants), optional sliding window"},
  };
  return rows;
}

const ArchitectureSpec* find_architecture(std::string_view architecture) {
  for (const ArchitectureSpec& row : architectures())
    if (row.name == architecture) return &row;
  return nullptr;
}

std::string supported_architectures() {
  std::string names;
  for (const ArchitectureSpec& row : architectures()) names += (names.empty() ? "" : ", ") + std::string(row.name);
  return names;
}

}  // namespace gb
