// complete_model_config: one check per line, each with a message a person can act on.
#include "model/model_validation.h"

#include <cmath>

namespace gb {

namespace {

Status check_range(const std::string& path, const char* what, int64_t value, int64_t limit) {
  if (value <= 0)
    return make_error(path + ": absurd model dimensions: " + what + " is " + std::to_string(value) +
                      " (must be positive)");
  if (value > limit)
    return make_error(path + ": absurd model dimensions: " + what + " " + std::to_string(value) +
                      " exceeds the limit " + std::to_string(limit));
  return Status::success();
}

}  // namespace

Status complete_model_config(ModelConfig& c, const std::string& path) {
  GB_TRY(check_range(path, "embedding width (dim)", c.dim, kMaxModelDim));
  GB_TRY(check_range(path, "FFN width (hidden_dim)", c.hidden_dim, kMaxModelDim * 4));
  GB_TRY(check_range(path, "layer count", c.num_layers, kMaxModelLayers));
  GB_TRY(check_range(path, "head count", c.num_heads, kMaxModelHeads));
  GB_TRY(check_range(path, "kv head count", c.num_kv_heads, kMaxModelHeads));
  GB_TRY(check_range(path, "vocab size", c.vocab_size, kMaxVocabSize));
  GB_TRY(check_range(path, "context length", c.context_length, kMaxContextLength));
  if (c.head_dim == 0 && c.dim % c.num_heads != 0)
    return make_error(path + ": absurd model dimensions: embedding width " + std::to_string(c.dim) +
                      " is not divisible by the head count " + std::to_string(c.num_heads));
  if (c.num_heads % c.num_kv_heads != 0)
    return make_error(path + ": absurd model dimensions: head count " + std::to_string(c.num_heads) +
                      " is not divisible by the kv head count " + std::to_string(c.num_kv_heads));
  if (c.head_dim == 0) c.head_dim = c.dim / c.num_heads;
  GB_TRY(check_range(path, "head size (attention.key_length)", c.head_dim, kMaxModelDim));
  if (c.rope_dim == 0) c.rope_dim = c.head_dim;
  if (c.head_dim % 2 != 0)
    return make_error(path + ": head size " + std::to_string(c.head_dim) + " is odd (RoPE rotates pairs)");
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0)
    return make_error(path + ": RoPE dimension count " + std::to_string(c.rope_dim) +
                      " must be even and between 2 and the head size " + std::to_string(c.head_dim));
  if (!std::isfinite(c.rope_freq_base) || c.rope_freq_base <= 0.0f)
    return make_error(path + ": RoPE frequency base " + std::to_string(c.rope_freq_base) + " is not positive");
  if (!std::isfinite(c.rms_eps) || c.rms_eps <= 0.0f || c.rms_eps > 1.0f)
    return make_error(path + ": RMSNorm epsilon " + std::to_string(c.rms_eps) + " is not in (0, 1]");
  return Status::success();
}

}  // namespace gb
