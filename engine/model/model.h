// Model: a loaded llama-family checkpoint (llama2.c legacy/v1 or GGUF v2/v3):
// its config, views of every weight tensor, and the embedded vocabulary if the
// file has one. The file stays memory-mapped for the Model's life; tensors that
// needed conversion live in owned buffers. Immutable after load_model() returns,
// so any thread may read it; share it through std::shared_ptr<const Model>.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "model/model_config.h"
#include "model/tensor_view.h"

namespace gb {

enum class ModelFormat { Llama2cLegacy, Llama2cV1, Gguf };
std::string_view model_format_name(ModelFormat f);

struct ModelWeights {
  TensorView token_embedding;       // (vocab_size, dim)
  std::vector<LayerWeights> layers; // (num_layers)
  TensorView output_norm;           // (dim)
  TensorView classifier;            // (vocab_size, dim); same data as token_embedding when tied
  TensorView rope_freqs;            // (rope_dim/2) F32 frequency divisors, or data == nullptr
  // Phi-3 128k: the factor set not chosen for this context (rope_freqs holds the
  // chosen one); kept so the file's every tensor is accounted for. Or data == nullptr.
  TensorView rope_factors_other;
  // Mixture of experts: how many experts the expert tensors hold and how many a
  // token reads (ModelConfig's counts; 0 for a dense model).
  int32_t experts = 0;
  int32_t experts_used = 0;
};

// A tokenizer vocabulary embedded in the model file (GGUF tokenizer.ggml.*).
struct Vocabulary {
  std::string model;                // tokenizer.ggml.model: "llama" (SentencePiece BPE), "gpt2" (byte-level BPE)
  std::string pre;                  // tokenizer.ggml.pre, may be empty
  std::vector<std::string> tokens;  // piece text as stored (SentencePiece uses U+2581 for space)
  std::vector<float> scores;        // same length as tokens, or empty
  std::vector<int32_t> token_types; // 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  std::vector<std::string> merges;  // tokenizer.ggml.merges ("left right", best first); byte-level BPE only
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t eot_id = -1;              // end of turn (tokenizer.ggml.eot_token_id), e.g. Llama 3's <|eot_id|>
  int32_t eom_id = -1;              // end of message (tokenizer.ggml.eom_token_id), e.g. <|eom_id|>
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  bool add_bos = true;
  bool add_eos = false;
  // SentencePiece's dummy prefix: a space is put before the text when encoding
  // and the first text piece's leading space is dropped when decoding. True by
  // default only for "llama" vocabularies (gguf_vocabulary.h).
  bool add_space_prefix = true;
};

class MappedFile;  // model/mapped_file.h

struct Model {
  std::string path;
  ModelFormat format = ModelFormat::Gguf;
  ModelConfig config;
  ModelWeights weights;
  std::optional<Vocabulary> vocabulary;  // present for GGUF files that carry one
  std::string chat_template;             // tokenizer.chat_template, may be empty
  std::string name;                      // general.name or the file stem
  // Human-readable metadata (key, value) pairs for `info` and the model panel.
  std::vector<std::pair<std::string, std::string>> metadata;

  std::shared_ptr<const MappedFile> file;             // keeps tensor data mapped
  std::vector<std::vector<std::byte>> owned_buffers;  // tensors that were converted on load

  // Every distinct tensor once, in file-independent order: token embedding,
  // each layer's nine tensors, output norm, then the classifier if untied.
  std::vector<const TensorView*> all_tensors() const;

  uint64_t num_parameters() const;  // every tensor counted once (tied classifier once)
  // The parameters one token uses: every tensor but the expert stacks, of which
  // only the chosen experts' share (num_parameters() for a dense model).
  uint64_t active_parameters() const;
  size_t weight_bytes() const;      // bytes of weights as stored, tied classifier once
  // Bytes of weights one decode step reads: every layer matrix, norms, the
  // classifier, and one embedding row.
  size_t weight_bytes_per_token() const;
};

// weight_bytes_per_token of weights as a backend holds them (a CPU backend may
// hold matrices in other types than the file's, backend/cpu_weights.h).
size_t weight_bytes_per_token(const ModelWeights& weights);

struct LoadOptions {
  // Called with the fraction read (0..1) while the weights are read into memory;
  // returning false cancels the load ("loading cancelled"). When set, every page
  // of the file is touched during load_model() (so a slow disk is read here, with
  // progress, and not during the first forward pass); without it pages are read
  // lazily. May be called from the loading thread only.
  std::function<bool(double fraction)> progress;
  // Largest context the caller may use; 0 keeps the file's declared context.
  // A value above the file's context is honoured (stories260K.gguf declares 128
  // but was trained at 512); config.context_length reports what was asked for.
  int32_t context_length = 0;
  // Scan every weight block for NaN/Inf scales (and float weights for NaN/Inf
  // values) after loading; the error names the first bad tensor and block.
  // Reads the whole file, so it is off by default.
  bool check_tensors = false;
};

// Loads and validates a model file. Every size, offset, count and string length
// is checked against the file size and sane limits before memory is allocated.
// Errors name the file and the problem.
Result<std::shared_ptr<const Model>> load_model(const std::string& path, const LoadOptions& options = {});

}  // namespace gb
