// Model's size accounting and the format names. The tied classifier shares the
// token embedding's bytes, so it is counted once everywhere except the per-token
// read estimate (a decode step reads one embedding row and the whole classifier;
// of a mixture's expert tensors, only the chosen experts' share).
#include "model/model.h"

namespace gb {

std::string_view model_format_name(ModelFormat f) {
  switch (f) {
    case ModelFormat::Llama2cLegacy: return "llama2.c (legacy)";
    case ModelFormat::Llama2cV1: return "llama2.c (version 1)";
    case ModelFormat::Gguf: return "GGUF";
  }
  return "?";
}

std::vector<const TensorView*> Model::all_tensors() const {
  std::vector<const TensorView*> out;
  out.push_back(&weights.token_embedding);
  for (const LayerWeights& l : weights.layers)
    for (const TensorView* t : l.all())
      if (t->data != nullptr) out.push_back(t);
  out.push_back(&weights.output_norm);
  // (YaRN's divisors are computed at load, not a tensor of the file.)
  if (weights.rope_freqs.data != nullptr && config.rope_yarn_factor <= 0.0f) out.push_back(&weights.rope_freqs);
  if (weights.rope_factors_other.data != nullptr) out.push_back(&weights.rope_factors_other);
  if (!config.tied_classifier) out.push_back(&weights.classifier);
  return out;
}

uint64_t Model::num_parameters() const {
  uint64_t n = 0;
  for (const TensorView* t : all_tensors()) n += static_cast<uint64_t>(t->num_elements());
  return n;
}

uint64_t Model::active_parameters() const {
  uint64_t n = 0;
  for (const TensorView* t : all_tensors()) {
    auto count = static_cast<uint64_t>(t->num_elements());
    for (const LayerWeights& l : weights.layers)
      if (l.is_expert_tensor(t) && weights.experts > 0) {
        count = count / static_cast<uint64_t>(weights.experts) * static_cast<uint64_t>(weights.experts_used);
        break;
      }
    n += count;
  }
  return n;
}

size_t Model::weight_bytes() const {
  size_t n = 0;
  for (const TensorView* t : all_tensors()) n += t->num_bytes();
  return n;
}

size_t Model::weight_bytes_per_token() const { return gb::weight_bytes_per_token(weights); }

size_t weight_bytes_per_token(const ModelWeights& weights) {
  size_t n = weights.token_embedding.row_bytes() + weights.output_norm.num_bytes() + weights.classifier.num_bytes();
  for (const LayerWeights& l : weights.layers)
    for (const TensorView* t : l.all()) {
      if (t->data == nullptr) continue;
      // A token reads only its experts' rows of the expert tensors.
      if (l.is_expert_tensor(t) && weights.experts > 0)
        n += t->num_bytes() / static_cast<size_t>(weights.experts) * static_cast<size_t>(weights.experts_used);
      else
        n += t->num_bytes();
    }
  return n;
}

}  // namespace gb
