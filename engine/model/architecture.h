// Architectures as data: one ArchitectureSpec row per GGUF general.architecture
// value says which tensors a block has, how RoPE pairs dimensions and whether
// q/k/v carry biases. The GGUF loader walks the row (and the shared tensor table
// in architecture.cpp) instead of hard-coding one family's names; the backends
// read the resulting ModelConfig flags. Immutable tables; any thread.
//
// Adding an architecture = one row here (plus, where it needs one, a new kernel
// and the backend support; a backend that lacks an op must refuse the model, see
// backend_supports()).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/model_config.h"

namespace gb {

struct ArchitectureSpec {
  std::string_view name;         // general.architecture; metadata keys are "<name>.embedding_length" ...
  RopeStyle rope_style = RopeStyle::Adjacent;
  bool qkv_bias = false;         // blk.N.attn_{q,k,v}.bias are required
  bool rope_freqs = false;       // an optional rope_freqs.weight (Llama-3.1 rope scaling) is read
  std::string_view summary;      // one line for docs and `info`
};

// The row for `architecture`, or null.
const ArchitectureSpec* find_architecture(std::string_view architecture);
// Comma-separated names of every supported architecture, for messages.
std::string supported_architectures();

}  // namespace gb
