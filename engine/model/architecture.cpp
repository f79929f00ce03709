// The architecture table (see architecture.h).
#include "model/architecture.h"

#include <cstdio>

namespace gb {

const std::vector<ArchitectureSpec>& architectures() {
  static const std::vector<ArchitectureSpec> rows = {
      {.name = "llama", .rope_style = RopeStyle::Adjacent, .rope_freqs = true, .moe = MoeSupport::Optional,
       .summary = "Llama 1/2/3.x, Mistral/Ministral, Mixtral: RMSNorm, SwiGLU, RoPE on adjacent pairs (GGUF permutes "
                  "q/k), optional rope_freqs (Llama-3.1 scaling), attention.sliding_window (every layer) and experts "
                  "(Mixtral: expert_count, top-k of a softmax router)"},
      {.name = "qwen2", .rope_style = RopeStyle::NeoX, .qkv_bias = true,
       .summary = "Qwen2 / Qwen2.5: llama block with q/k/v biases and NeoX RoPE"},
      {.name = "qwen3", .rope_style = RopeStyle::NeoX, .qk_norm = true,
       .summary = "Qwen3: NeoX RoPE, per-head RMSNorm on q and k, explicit head_dim, no biases"},
      {.name = "qwen3moe", .rope_style = RopeStyle::NeoX, .qk_norm = true, .moe = MoeSupport::Required,
       .expert_ffn_length_key = true,
       .summary = "Qwen3-MoE: Qwen3's attention, every FFN a mixture of experts (top-k of a softmax router, the "
                  "chosen weights renormalized)"},
      {.name = "gemma2", .rope_style = RopeStyle::NeoX, .post_norms = true, .embed_scale_sqrt_dim = true,
       .activation = FfnActivation::GeluTanh, .swa_pattern = 2, .default_sliding_window = 4096, .layers_27b = 46,
       .summary = "Gemma 2: GELU-tanh gated FFN, (1+w) RMSNorm (stored with the 1 added), post-attention and "
                  "post-FFN norms, embeddings x sqrt(dim), attention and final soft-caps, sliding window on even layers"},
      {.name = "gemma3", .rope_style = RopeStyle::NeoX, .qk_norm = true, .post_norms = true,
       .embed_scale_sqrt_dim = true, .activation = FfnActivation::GeluTanh, .swa_pattern = 6,
       .rope_freq_base_swa = 10000.0f, .layers_27b = 62,
       .summary = "Gemma 3 (text): Gemma 2's block with q/k norms, five sliding layers per global one, local RoPE "
                  "base 10000 and the file's global base (linear scaling on global layers)"},
      {.name = "gpt-oss", .rope_style = RopeStyle::NeoX, .qkv_bias = true, .out_bias = true, .attn_sinks = true,
       .ffn_norm_post_attention = true, .moe_biases = true, .yarn_truncate = false,
       .activation = FfnActivation::SwigluOai, .swa_pattern = 2, .moe = MoeSupport::Required,
       .expert_ffn_length_key = true,
       .summary = "gpt-oss: every FFN a mixture of experts (biases, router top-k then softmax, clamped SwiGLU), "
                  "q/k/v/o biases, a learned attention sink per head, a sliding window on even layers, YaRN RoPE"},
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

// RoPE in one line: pairing, base(s), scaling and frequency factors.
std::string describe_rope(const ModelConfig& c) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s pairs, base %g", c.rope_style == RopeStyle::NeoX ? "NeoX (i, i+d/2)" : "adjacent",
                static_cast<double>(c.rope_freq_base));
  std::string s = buf;
  if (c.rope_freq_base_swa > 0.0f) {
    std::snprintf(buf, sizeof buf, ", sliding layers base %g", static_cast<double>(c.rope_freq_base_swa));
    s += buf;
  }
  if (c.rope_freq_scale != 1.0f) {
    std::snprintf(buf, sizeof buf, ", linear scaling x%g", 1.0 / static_cast<double>(c.rope_freq_scale));
    s += buf + std::string(c.sliding_window > 0 ? " (global layers)" : "");
  }
  if (c.rope_yarn_factor > 0.0f) {
    std::snprintf(buf, sizeof buf, ", YaRN x%g (original context %d, beta %g/%g%s)",
                  static_cast<double>(c.rope_yarn_factor), c.rope_orig_context,
                  static_cast<double>(c.rope_yarn_beta_fast), static_cast<double>(c.rope_yarn_beta_slow),
                  c.rope_yarn_truncate ? "" : ", not truncated");
    s += buf;
  } else if (c.rope_freq_factors)
    s += c.rope_orig_context > 0 ? std::string(", LongRoPE ") + (c.rope_long_factors ? "long" : "short") +
                                       " factors (original context " + std::to_string(c.rope_orig_context) + ")"
                                 : ", rope_freqs factors (Llama 3.1 scaling)";
  if (c.rope_attn_factor != 1.0f) {
    std::snprintf(buf, sizeof buf, ", attention factor %.4g", static_cast<double>(c.rope_attn_factor));
    s += buf;
  }
  return s;
}

// Sliding-window layout in one line, or "none".
std::string describe_sliding_window(const ModelConfig& c) {
  if (c.sliding_window <= 0) return "none";
  int sliding = 0;
  for (int32_t l = 0; l < c.num_layers; ++l) sliding += c.is_sliding(l) ? 1 : 0;
  std::string s = std::to_string(c.sliding_window) + " tokens on " + std::to_string(sliding) + " of " +
                  std::to_string(c.num_layers) + " layers";
  if (c.swa_pattern > 1) s += " (" + std::to_string(c.swa_pattern - 1) + " sliding per global layer)";
  // How the paged KV cache gives blocks back (kv/scheduler.h): every layer's
  // blocks when no layer reads the whole context, else the sliding layers'
  // own (a window group) while the global layers keep every block.
  s += c.kv_release_window() > 0 ? "; KV blocks that leave the window are released"
                                 : "; sliding layers keep only their window (a KV pool of their own), global layers every "
                                   "token";
  return s;
}

// Block variations beyond llama's, in one line.
std::string describe_block(const ModelConfig& c) {
  std::string s = std::string(ffn_activation_names(c.activation).ffn) + (c.is_moe() ? " experts" : " FFN");
  if (c.qkv_bias) s += ", q/k/v biases";
  if (c.out_bias) s += ", output bias";
  if (c.attn_sinks) s += ", attention sinks";
  if (c.moe_biases) s += ", router and expert biases";
  if (c.qk_norm) s += ", q/k RMSNorm";
  if (c.post_norms) s += ", post-attention/FFN norms";
  if (c.fused_qkv) s += ", fused qkv";
  if (c.fused_gate_up) s += ", fused gate/up";
  if (c.is_moe())
    s += ", " + std::to_string(c.num_experts) + " experts of width " + std::to_string(c.expert_hidden_dim) + ", " +
         std::to_string(c.num_experts_used) + " per token";
  char buf[96];
  if (c.embed_scale != 1.0f) {
    std::snprintf(buf, sizeof buf, ", embeddings x%.4g", static_cast<double>(c.embed_scale));
    s += buf;
  }
  std::snprintf(buf, sizeof buf, ", query scale %.4g", static_cast<double>(c.query_scale()));
  return s + buf;
}

std::string describe_softcaps(const ModelConfig& c) {
  if (c.attn_softcap <= 0.0f && c.final_softcap <= 0.0f) return "none";
  char buf[96];
  std::snprintf(buf, sizeof buf, "attention %g, final logits %g", static_cast<double>(c.attn_softcap),
                static_cast<double>(c.final_softcap));
  return buf;
}

}  // namespace gb
