// The architecture table (see architecture.h).
#include "model/architecture.h"

namespace gb {
namespace {

const std::vector<ArchitectureSpec>& table() {
  static const std::vector<ArchitectureSpec> rows = {
      {"llama", RopeStyle::Adjacent, false, true,
       "Llama 1/2/3.x, Mistral 7B: RMSNorm, SwiGLU, RoPE on adjacent pairs (GGUF permutes q/k), "
       "optional rope_freqs (Llama-3.1 scaling)"},
      {"qwen2", RopeStyle::NeoX, true, false, "Qwen2 / Qwen2.5: llama block with q/k/v biases and NeoX RoPE"},
  };
  return rows;
}

}  // namespace

const ArchitectureSpec* find_architecture(std::string_view architecture) {
  for (const ArchitectureSpec& row : table())
    if (row.name == architecture) return &row;
  return nullptr;
}

std::string supported_architectures() {
  std::string names;
  for (const ArchitectureSpec& row : table()) names += (names.empty() ? "" : ", ") + std::string(row.name);
  return names;
}

}  // namespace gb
