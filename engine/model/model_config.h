// ModelConfig: the hyper-parameters of a llama-family decoder, as read from a
// model file. Immutable once a model is loaded; any thread may read it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gb {

// How RoPE pairs a head's dimensions (kernels/cpu/ops.h has the same two).
enum class RopeStyle {
  Adjacent,  // (2i, 2i+1): llama2.c and GGUF llama files
  NeoX,      // (i, i + rope_dim/2): Qwen2, Gemma, Phi-3
};

struct ModelConfig {
  std::string architecture = "llama";
  int32_t dim = 0;              // embedding width (d_model)
  int32_t hidden_dim = 0;       // FFN inner width
  int32_t num_layers = 0;
  int32_t num_heads = 0;        // query heads
  int32_t num_kv_heads = 0;     // key/value heads (GQA: num_heads % num_kv_heads == 0)
  int32_t head_dim = 0;         // dim / num_heads
  int32_t rope_dim = 0;         // rotated dimensions per head (<= head_dim, even)
  int32_t vocab_size = 0;
  int32_t context_length = 0;   // the file's declared context; callers may ask for more
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_classifier = true;  // output projection shares the token embedding
  RopeStyle rope_style = RopeStyle::Adjacent;
  bool qkv_bias = false;        // q/k/v projections add a bias (Qwen2)
  bool rope_freq_factors = false;  // ModelWeights::rope_freqs holds per-pair frequency divisors

  int32_t kv_dim() const { return num_kv_heads * head_dim; }
  // Bytes of K and V for one token across all layers at element size `bytes`:
  // 2 x layers x kv_heads x head_dim x bytes.
  size_t kv_bytes_per_token(size_t bytes = sizeof(float)) const {
    return size_t{2} * static_cast<size_t>(num_layers) * static_cast<size_t>(kv_dim()) * bytes;
  }
};

}  // namespace gb
