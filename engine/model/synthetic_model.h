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
  // Beyond the llama block (the Qwen3-MoE shapes): the architecture written,
  // an explicit head size (0: dim / heads), q/k norms, and a mixture of
  // `experts` FFNs of width expert_hidden_dim with experts_used per token.
  std::string architecture = "llama";
  int32_t head_dim = 0;
  bool qk_norm = false;
  int32_t experts = 0;
  int32_t experts_used = 0;
  int32_t expert_hidden_dim = 0;
};

// stories260K, stories15M, stories42M, stories110M, tinyllama-1.1b, llama-3.1-8b,
// qwen3-30b-a3b (a mixture of experts: with `synth --layers N` a side-by-side
// file fits the machine).
const std::vector<SyntheticShape>& synthetic_shapes();
std::optional<SyntheticShape> find_synthetic_shape(std::string_view name);

struct SyntheticSpec {
  SyntheticShape shape;
  WeightType dtype = WeightType::F32;  // matrices and embedding; norm vectors stay F32
  uint64_t seed = 1;
};

// The generated vocabulary for `vocab_size` tokens (see the header comment).
Vocabulary make_synthetic_vocabulary(int32_t vocab_size);

// Writes the model as GGUF v3. progress gets (bytes written, total) after each tensor.
Status write_synthetic_model(const SyntheticSpec& spec, const std::string& path,
                             const std::function<void(uint64_t, uint64_t)>& progress = {});

// Small random models of each supported architecture (`synth --arch NAME`), with
// llama.cpp's key and tensor names and conventions (llama q/k permutation and
// Gemma's stored (1 + w) norms are implied: the bytes are random, the reader
// decides). Meant for references: matrices N(0, 1.28/sqrt(fan_in)), norms
// 1 + N(0, 0.1), final norm scaled for logits of standard deviation ~10.
struct SyntheticArch {
  std::string name;          // --arch value
  std::string architecture;  // general.architecture
  int32_t dim = 0, hidden_dim = 0, num_layers = 0, num_heads = 0, num_kv_heads = 0;
  int32_t head_dim = 0;      // 0: dim / heads and no attention.key_length key
  int32_t vocab_size = 0, context_length = 0;
  float rope_base = 10000.0f, rms_eps = 1e-5f;
  bool tied = true;
  int32_t sliding_window = 0;
  float attn_softcap = 0.0f, final_softcap = 0.0f;
  float rope_linear_factor = 0.0f;  // > 0: rope.scaling.type linear with this factor
  int32_t rope_orig_context = 0;    // > 0: LongRoPE long/short factors and attn_factor (Phi-3 128k)
  float embed_std = 0.5f;           // token embedding N(0, embed_std^2); small keeps a tied model from copying its input
};

const std::vector<SyntheticArch>& synthetic_archs();
const SyntheticArch* find_synthetic_arch(std::string_view name);
// The LongRoPE factors synth writes (n = rope_dim / 2).
std::vector<float> synthetic_rope_factors(int32_t n, bool long_factors);
// Writes the model (F32 tensors, the generated vocabulary) as GGUF v3.
Status write_synthetic_arch_model(const SyntheticArch& arch, uint64_t seed, const std::string& path);

}  // namespace gb
