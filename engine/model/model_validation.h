// Sanity checks on a ModelConfig read from a file, shared by the GGUF and
// llama2.c loaders. The limits are far above any real llama-family model, and
// low enough that every byte count derived from them fits in 64 bits, so the
// loaders can multiply dimensions without overflow checks once this passed.
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"
#include "model/model_config.h"

namespace gb {

inline constexpr int32_t kMaxModelDim = 1 << 20;        // embedding and FFN widths
inline constexpr int32_t kMaxModelLayers = 4096;
inline constexpr int32_t kMaxModelHeads = 4096;
inline constexpr int32_t kMaxExperts = 1024;          // experts per mixture layer
inline constexpr int32_t kMaxVocabSize = 1 << 24;       // 16.7M tokens
inline constexpr int32_t kMaxContextLength = 1 << 24;

// Validates and completes a config: fails, naming `path` and the offending value, when a dimension is zero,
// negative or above its limit, when dim is not divisible by num_heads, when
// num_heads is not divisible by num_kv_heads, when head_dim or rope_dim is odd
// or rope_dim > head_dim, or when rope base / rms eps is not a positive finite
// number. On success sets head_dim = dim / num_heads when it is 0 (not given by
// the file's attention.key_length; then dim must divide) and, when rope_dim is 0
// (not given by the file), rope_dim = head_dim.
Status complete_model_config(ModelConfig& config, const std::string& path);

}  // namespace gb
