// Architectures as data: one ArchitectureSpec row per GGUF general.architecture
// value says which tensors a block has, how RoPE pairs dimensions, the FFN
// activation, the norms, soft-caps and sliding-window layout. The GGUF loader walks
// the row (and the shared tensor table in model_loader.cpp) instead of hard-coding
// one family's names; the backends read the resulting ModelConfig fields.
// Immutable tables; any thread.
//
// Adding an architecture = one row here (plus, where it needs one, a new
// operation in the layer recipe, backend/layer_recipe.h, that every backend
// implements).
//
// GGUF conventions followed (llama.cpp's converter, convert_hf_to_gguf.py):
// llama files have q/k rows permuted for adjacent-pair RoPE; Gemma norm weights
// are stored as (1 + w), so a plain RMSNorm applies them; Gemma's query scale is
// not stored: it is 1/sqrt(head_dim), except 1/sqrt(dim / heads) for the 27B
// shapes (llama.cpp's rule, from gemma_pytorch's config).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/model_config.h"

namespace gb {

enum class MoeSupport : uint8_t { None, Optional, Required };

struct ArchitectureSpec {
  std::string_view name;         // general.architecture; metadata keys are "<name>.embedding_length" ...
  RopeStyle rope_style = RopeStyle::Adjacent;
  bool qkv_bias = false;         // blk.N.attn_{q,k,v}.bias are required
  bool out_bias = false;         // blk.N.attn_output.bias is required (gpt-oss)
  bool attn_sinks = false;       // blk.N.attn_sinks.weight (num_heads sink logits) is required (gpt-oss)
  // The FFN's input norm is stored as blk.N.post_attention_norm (gpt-oss, after
  // Hugging Face's post_attention_layernorm), not blk.N.ffn_norm.
  bool ffn_norm_post_attention = false;
  bool moe_biases = false;       // ffn_gate_inp.bias and ffn_{gate,up,down}_exps.bias are required (gpt-oss)
  // YaRN's correction range rounded outward to whole dimensions (llama.cpp and
  // transformers' default); gpt-oss's config says truncate = false.
  bool yarn_truncate = true;
  bool rope_freqs = false;       // an optional rope_freqs.weight (Llama-3.1 rope scaling) is read
  bool qk_norm = false;          // blk.N.attn_{q,k}_norm.weight (head_dim) are required
  bool post_norms = false;       // blk.N.post_attention_norm / post_ffw_norm are required
  bool fused_qkv = false;        // blk.N.attn_qkv.weight instead of attn_q/k/v
  bool fused_gate_up = false;    // blk.N.ffn_up.weight holds gate and up (2 x hidden rows), no ffn_gate
  bool rope_long_short = false;  // optional rope_factors_long/short.weight (Phi-3 128k)
  bool embed_scale_sqrt_dim = false;  // embeddings x sqrt(dim)
  FfnActivation activation = FfnActivation::SiLU;
  int32_t swa_pattern = 1;            // see ModelConfig::swa_pattern
  int32_t default_sliding_window = 0; // used when the file has no <arch>.attention.sliding_window
  float rope_freq_base_swa = 0.0f;    // sliding layers' RoPE base when the file does not say (0: global base)
  int32_t layers_27b = 0;             // layer count of the shape whose query scale is 1/sqrt(dim/heads)
  // Mixture of experts (<arch>.expert_count > 0): refused (None), taken when the
  // file says so (Optional: Mixtral is written as `llama`) or required.
  MoeSupport moe = MoeSupport::None;
  // The experts' width: <arch>.expert_feed_forward_length (Qwen3-MoE) when set,
  // else <arch>.feed_forward_length (Mixtral).
  bool expert_ffn_length_key = false;
  std::string_view summary;           // one line for docs and `info`
};

// The row for `architecture`, or null.
const ArchitectureSpec* find_architecture(std::string_view architecture);
// Every row, in table order.
const std::vector<ArchitectureSpec>& architectures();
// Comma-separated names of every supported architecture, for messages.
std::string supported_architectures();

// One-line descriptions of a loaded config for `info` and the Model panel:
// RoPE (pairing, bases, scaling, factors), the sliding-window layout ("none" or
// "W tokens on n of L layers ..."), the block's variations, the soft-caps.
std::string describe_rope(const ModelConfig& c);
std::string describe_sliding_window(const ModelConfig& c);
std::string describe_block(const ModelConfig& c);
std::string describe_softcaps(const ModelConfig& c);

}  // namespace gb
