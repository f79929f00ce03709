// ModelConfig: the hyper-parameters of a llama-family decoder, as read from a
// model file. Immutable once a model is loaded; any thread may read it.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gb {

// How RoPE pairs a head's dimensions (kernels/cpu/ops.h has the same two).
enum class RopeStyle {
  Adjacent,  // (2i, 2i+1): llama2.c and GGUF llama files
  NeoX,      // (i, i + rope_dim/2): Qwen2, Gemma, Phi-3
};

// The gated FFN's activation: down(act(gate x) * up x).
enum class FfnActivation {
  SiLU,       // SwiGLU: llama, Qwen, Mistral, Phi-3
  GeluTanh,   // GeGLU with the tanh approximation of GELU: Gemma 2/3
  SwigluOai,  // gpt-oss: (clamp(up, -7, 7) + 1) * g * sigmoid(1.702 g), g = min(gate, 7)
};
inline constexpr int kNumFfnActivations = static_cast<int>(FfnActivation::SwigluOai) + 1;
// Each activation's names: the recipe's (describe_step) and the FFN's, for `info`.
struct FfnActivationNames {
  std::string_view recipe;  // "silu"
  std::string_view ffn;     // "SwiGLU"
};
inline const FfnActivationNames& ffn_activation_names(FfnActivation a) {
  static constexpr FfnActivationNames rows[kNumFfnActivations] = {
      {"silu", "SwiGLU"}, {"gelu_tanh", "GELU-tanh gated"}, {"swiglu_oai", "clamped SwiGLU (gpt-oss)"}};
  return rows[static_cast<int>(a)];
}

struct ModelConfig {
  std::string architecture = "llama";
  int32_t dim = 0;              // embedding width (d_model)
  int32_t hidden_dim = 0;       // FFN inner width
  int32_t num_layers = 0;
  int32_t num_heads = 0;        // query heads
  int32_t num_kv_heads = 0;     // key/value heads (GQA: num_heads % num_kv_heads == 0)
  int32_t head_dim = 0;         // <arch>.attention.key_length, else dim / num_heads
  int32_t rope_dim = 0;         // rotated dimensions per head (<= head_dim, even)
  int32_t vocab_size = 0;
  int32_t context_length = 0;   // the file's declared context; callers may ask for more
  int32_t file_context_length = 0;  // the file's own context when a load asked for another (loader)
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_classifier = true;  // output projection shares the token embedding
  RopeStyle rope_style = RopeStyle::Adjacent;
  bool qkv_bias = false;        // q/k/v projections add a bias (Qwen2)
  bool out_bias = false;        // the attention output projection adds a bias (gpt-oss)
  bool attn_sinks = false;      // each query head has a learned sink logit in its softmax (gpt-oss)
  bool rope_freq_factors = false;  // ModelWeights::rope_freqs holds per-pair frequency divisors
  // Architecture variations beyond the llama block (architecture.h sets them from
  // the table row and the file's keys; the defaults are plain llama).
  FfnActivation activation = FfnActivation::SiLU;
  bool qk_norm = false;          // per-head RMSNorm on q and k before RoPE (Qwen3, Gemma 3)
  bool post_norms = false;       // RMSNorm on the attention and FFN outputs before the residual add (Gemma 2/3)
  bool fused_qkv = false;        // one attn_qkv matrix: rows q, then k, then v (Phi-3)
  bool fused_gate_up = false;    // ffn_up holds gate rows then up rows, no ffn_gate (Phi-3)
  float embed_scale = 1.0f;      // token embeddings are multiplied by this (Gemma: sqrt(dim))
  float attn_scale = 0.0f;       // query scale; 0 means 1/sqrt(head_dim)
  float attn_softcap = 0.0f;     // scores become cap * tanh(scores / cap) when > 0 (Gemma 2)
  float final_softcap = 0.0f;    // logits likewise (Gemma 2)
  // Sliding-window attention: a query at position p sees positions p - W + 1 .. p
  // on sliding layers. 0: none.
  int32_t sliding_window = 0;
  // Layer l slides when l % swa_pattern < swa_pattern - 1 (Gemma 2: 2, Gemma 3: 6);
  // 1 means every layer slides (Mistral, Phi-3).
  int32_t swa_pattern = 1;
  float rope_freq_base_swa = 0.0f;  // RoPE base of sliding layers; 0: rope_freq_base (Gemma 3: 10000)
  float rope_freq_scale = 1.0f;     // linear RoPE scaling of the global layers (positions x scale)
  float rope_attn_factor = 1.0f;    // cos/sin multiplier (Phi-3 LongRoPE's attention factor)
  int32_t rope_orig_context = 0;    // <arch>.rope.scaling.original_context_length, 0 if absent
  bool rope_long_factors = false;   // Phi-3: the long factors were chosen (context > original)
  // YaRN (<arch>.rope.scaling.type = yarn: gpt-oss): the factor (0: none), the
  // correction range's rotation counts and whether it is rounded to whole
  // dimensions. The loader turns them into per-pair frequency divisors
  // (ModelWeights::rope_freqs) and multiplies rope_attn_factor by 0.1 ln(factor) + 1.
  float rope_yarn_factor = 0.0f;
  float rope_yarn_beta_fast = 32.0f;
  float rope_yarn_beta_slow = 1.0f;
  bool rope_yarn_truncate = true;
  // Mixture of experts (Qwen3-MoE, Mixtral): every layer's FFN is num_experts
  // gated FFNs of width expert_hidden_dim, of which a router picks
  // num_experts_used per token (softmax over all experts, the chosen weights
  // renormalized to sum 1). 0: a dense FFN of width hidden_dim.
  int32_t num_experts = 0;
  int32_t num_experts_used = 0;
  int32_t expert_hidden_dim = 0;
  bool moe_biases = false;  // the router and every expert's gate/up/down add biases (gpt-oss)
  bool is_moe() const { return num_experts > 0; }

  bool is_sliding(int32_t layer) const {
    return sliding_window > 0 && (swa_pattern <= 1 || layer % swa_pattern < swa_pattern - 1);
  }
  // The window after which a position is read by no layer at all, so its KV
  // block can be released: sliding_window when every layer slides (Mistral,
  // Phi-3), 0 when none does or some layer is global (Gemma 2/3: their
  // sliding layers can keep a window group, has_window_group()).
  int32_t kv_release_window() const {
    if (sliding_window <= 0) return 0;
    for (int32_t l = 0; l < num_layers; ++l)
      if (!is_sliding(l)) return 0;
    return sliding_window;
  }
  // Some layers slide and some do not (Gemma 2/3): the sliding layers can keep
  // only their window in a KV pool of their own (a window group; backend.h,
  // kv/scheduler.h) while the others keep the whole context.
  bool has_window_group() const { return sliding_window > 0 && kv_release_window() == 0 && num_sliding_layers() > 0; }
  int32_t num_sliding_layers() const {
    int32_t n = 0;
    for (int32_t l = 0; l < num_layers; ++l) n += is_sliding(l) ? 1 : 0;
    return n;
  }
  float query_scale() const { return attn_scale > 0.0f ? attn_scale : 1.0f / std::sqrt(static_cast<float>(head_dim)); }

  int32_t kv_dim() const { return num_kv_heads * head_dim; }
  // Bytes of K and V for one token across all layers at element size `bytes`:
  // 2 x layers x kv_heads x head_dim x bytes.
  // KV bytes per token with every layer's K and V in float32 (bytes = 4) or
  // another plain float width; backend/kv_pool_sizing.h counts any KV type.
  size_t kv_bytes_per_token(size_t bytes = sizeof(float)) const {
    return size_t{2} * static_cast<size_t>(num_layers) * static_cast<size_t>(kv_dim()) * bytes;
  }
};

}  // namespace gb
