// Synthetic llama models: GGUF files with the shapes of well-known checkpoints,
// seeded random weights and a generated SentencePiece-style vocabulary, so
// benchmarks and tests can run at real sizes without downloading anything.
// The weights are meaningless but well-scaled (matrices ~ N(0, 0.02^2), norm
// weights 1), so logits are finite and varied. Pure functions; any thread.
//
// Vocabulary (valid for the SPM/BPE tokenizer, byte fallback covers any text):
//   0 <unk> (unknown), 1 <s>, 2 </s> (control), 3..258 <0x00>..<0xFF> (byte),
//   then distinct pieces: single characters (U+2581 "▁" and printable ASCII),
//   then each earlier piece extended by one character, so every multi-character
//   piece is a merge of two existing pieces. Scores decrease with the id.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "model/dtype.h"
#include "model/model.h"

namespace gb {

struct SyntheticShape {
  std::string name;
  int32_t dim = 0;
  int32_t hidden_dim = 0;
  int32_t num_layers = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t vocab_size = 0;       // >= 259 + 1 (specials and byte tokens, at least one piece)
  int32_t context_length = 0;
  bool tied_classifier = true;  // llama2.c-trained shapes tie; tinyllama does not
};

// stories260K, stories15M, stories42M, stories110M, tinyllama-1.1b.
const std::vector<SyntheticShape>& synthetic_shapes();
std::optional<SyntheticShape> find_synthetic_shape(std::string_view name);

struct SyntheticSpec {
  SyntheticShape shape;
  DType dtype = DType::F32;  // matrices and embedding; norm vectors stay F32
  uint64_t seed = 1;
};

// The generated vocabulary for `vocab_size` tokens (see the header comment).
Vocabulary make_synthetic_vocabulary(int32_t vocab_size);

// Writes the model as GGUF v3. progress gets (bytes written, total) after each tensor.
Status write_synthetic_model(const SyntheticSpec& spec, const std::string& path,
                             const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace gb
