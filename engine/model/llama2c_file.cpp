// llama2.c loading: parse the header, validate the config, compute the exact
// byte layout, check it against the file size, then hand out views in file
// order. All offsets are multiples of 4 (28- and 256-byte headers, fp32 data),
// so every view is float-aligned inside the page-aligned mapping.
#include "model/llama2c_file.h"

#include <cstring>

#include "model/byte_cursor.h"
#include "model/mapped_file.h"
#include "model/model_validation.h"

namespace gb {

namespace {

struct Llama2cHeader {
  int32_t dim, hidden_dim, num_layers, num_heads, num_kv_heads, vocab_size, seq_len;
};

// Hands out consecutive fp32 views from the weight section. Sizes were checked
// against the file before the first take(), so takes cannot run past the end.
class ViewCursor {
 public:
  explicit ViewCursor(const std::byte* start) : at_(start) {}

  TensorView take(std::string name, int64_t rows, int64_t cols) {
    TensorView v{std::move(name), WeightType::F32, at_, rows, cols};
    at_ += static_cast<size_t>(rows * cols) * sizeof(float);
    return v;
  }
  // A (L, rows, cols) stack: one view per layer, written into member `field`.
  void take_layers(std::vector<LayerWeights>& layers, TensorView LayerWeights::*field, const char* suffix,
                   int64_t rows, int64_t cols) {
    for (size_t l = 0; l < layers.size(); ++l)
      layers[l].*field = take("blk." + std::to_string(l) + "." + suffix, rows, cols);
  }
  void skip_floats(uint64_t n) { at_ += n * sizeof(float); }

 private:
  const std::byte* at_;
};

// The header: the version 1 format (magic, version, config, shared flag, padded
// to kLlama2cV1HeaderBytes) or the legacy one (the bare config). Leaves `cur` at
// the first weight and sets model.format.
Status read_header(ByteCursor& cur, const std::string& path, Model& model, Llama2cHeader& h, bool& shared_classifier) {
  uint32_t magic = 0;
  GB_TRY(cur.read(magic, "llama2.c header"));
  shared_classifier = true;
  if (magic == kLlama2cMagic) {
    int32_t version = 0;
    GB_TRY(cur.read(version, "llama2.c version"));
    if (version != 1)
      return make_error(path + ": unsupported llama2.c checkpoint version " + std::to_string(version) +
                        " (only fp32 version 1 and the legacy format are supported)");
    GB_TRY(cur.need(kLlama2cV1HeaderBytes - 8, "llama2.c version 1 header"));
    GB_TRY(cur.read(h, "llama2.c config"));
    uint8_t shared = 0;
    GB_TRY(cur.read(shared, "llama2.c shared_classifier flag"));
    if (shared > 1) return make_error(path + ": shared_classifier flag is " + std::to_string(shared) + " (not 0 or 1)");
    shared_classifier = shared == 1;
    GB_TRY(cur.seek(kLlama2cV1HeaderBytes, "llama2.c weights"));
    model.format = ModelFormat::Llama2cV1;
  } else {
    GB_TRY(cur.seek(0, "llama2.c header"));
    GB_TRY(cur.read(h, "llama2.c legacy header"));
    // The legacy export signals an untied classifier with a negative vocab size.
    shared_classifier = h.vocab_size > 0;
    if (h.vocab_size < 0 && h.vocab_size != INT32_MIN) h.vocab_size = -h.vocab_size;
    model.format = ModelFormat::Llama2cLegacy;
  }
  return Status::success();
}

// The weight views in file order (the two formats order the norms differently;
// a legacy file also carries freq_cis, skipped, before an untied classifier).
void take_weights(ViewCursor& at, Model& model, bool shared_classifier, uint64_t freq_cis_floats) {
  const ModelConfig& c = model.config;
  ModelWeights& w = model.weights;
  w.layers.assign(static_cast<size_t>(c.num_layers), LayerWeights{});
  const int64_t d = c.dim, h_dim = c.hidden_dim, kv = c.kv_dim(), v = c.vocab_size;
  const bool legacy = model.format == ModelFormat::Llama2cLegacy;
  if (legacy) {
    w.token_embedding = at.take("token_embd.weight", v, d);
    at.take_layers(w.layers, &LayerWeights::attn_norm, "attn_norm.weight", 1, d);
  } else {
    at.take_layers(w.layers, &LayerWeights::attn_norm, "attn_norm.weight", 1, d);
    at.take_layers(w.layers, &LayerWeights::ffn_norm, "ffn_norm.weight", 1, d);
    w.output_norm = at.take("output_norm.weight", 1, d);
    w.token_embedding = at.take("token_embd.weight", v, d);
  }
  at.take_layers(w.layers, &LayerWeights::wq, "attn_q.weight", d, d);
  at.take_layers(w.layers, &LayerWeights::wk, "attn_k.weight", kv, d);
  at.take_layers(w.layers, &LayerWeights::wv, "attn_v.weight", kv, d);
  at.take_layers(w.layers, &LayerWeights::wo, "attn_output.weight", d, d);
  if (legacy) at.take_layers(w.layers, &LayerWeights::ffn_norm, "ffn_norm.weight", 1, d);
  at.take_layers(w.layers, &LayerWeights::w_gate, "ffn_gate.weight", h_dim, d);
  at.take_layers(w.layers, &LayerWeights::w_down, "ffn_down.weight", d, h_dim);
  at.take_layers(w.layers, &LayerWeights::w_up, "ffn_up.weight", h_dim, d);
  if (legacy) {
    w.output_norm = at.take("output_norm.weight", 1, d);
    if (!shared_classifier) at.skip_floats(freq_cis_floats);
  }
  w.classifier = shared_classifier ? w.token_embedding : at.take("output.weight", v, d);
}

}  // namespace

Status read_llama2c_model(const std::shared_ptr<const MappedFile>& file, Model& model, bool* header_plausible) {
  const std::string& path = file->path();
  ByteCursor cur(file->bytes(), path);
  bool shared_classifier = true;
  Llama2cHeader h{};
  GB_TRY(read_header(cur, path, model, h, shared_classifier));

  ModelConfig& c = model.config;
  c.architecture = "llama";
  c.dim = h.dim;
  c.hidden_dim = h.hidden_dim;
  c.num_layers = h.num_layers;
  c.num_heads = h.num_heads;
  c.num_kv_heads = h.num_kv_heads;
  c.vocab_size = h.vocab_size;
  c.context_length = h.seq_len;
  c.rope_dim = 0;  // llama2.c rotates the whole head
  c.rope_freq_base = 10000.0f;
  c.rms_eps = 1e-5f;
  c.tied_classifier = shared_classifier;
  GB_TRY(complete_model_config(c, path));
  if (header_plausible != nullptr) *header_plausible = true;

  // Every product below is < 2^60 thanks to the config limits.
  const uint64_t D = static_cast<uint64_t>(c.dim), H = static_cast<uint64_t>(c.hidden_dim);
  const uint64_t L = static_cast<uint64_t>(c.num_layers), V = static_cast<uint64_t>(c.vocab_size);
  const uint64_t KV = static_cast<uint64_t>(c.kv_dim());
  const uint64_t freq_cis_floats = model.format == ModelFormat::Llama2cLegacy
                                       ? static_cast<uint64_t>(c.context_length) * c.head_dim : 0;
  uint64_t num_floats = V * D + L * (2 * D + 2 * D * D + 2 * KV * D + 3 * H * D) + D;
  // Legacy files always carry freq_cis; a tied one needs no bytes past rms_final.
  if (!shared_classifier) num_floats += freq_cis_floats + V * D;
  const uint64_t need_bytes = num_floats * sizeof(float);
  if (need_bytes > cur.remaining())
    return make_error(path + ": truncated or absurd llama2.c checkpoint: dim " + std::to_string(D) + ", hidden " +
                      std::to_string(H) + ", layers " + std::to_string(L) + ", vocab " + std::to_string(V) +
                      " need " + std::to_string(need_bytes) + " bytes of weights but the file has " +
                      std::to_string(cur.remaining()) + " after the header");

  ViewCursor at(cur.current());
  take_weights(at, model, shared_classifier, freq_cis_floats);
  return Status::success();
}

}  // namespace gb
