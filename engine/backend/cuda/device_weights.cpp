#include "backend/cuda/device_weights.h"

#include <array>
#include <cstdint>
#include <vector>
#include <cstring>
#include <optional>
#include <string>

#include "cpu/weight_type.h"
#include "cuda/cuda_kernels.h"
#include "model/model.h"

namespace gb::cuda {
namespace {

constexpr size_t kAlign = 256;  // cuBLAS and vector loads like aligned bases
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

Status expect_shape(const Model& model, const TensorView& t, int64_t rows, int64_t cols) {
  if (t.data == nullptr || t.rows != rows || t.cols != cols)
    return make_error(model.path + ": tensor " + t.name + " has shape (" + std::to_string(t.rows) + ", " +
                      std::to_string(t.cols) + "), the CUDA backend expected (" + std::to_string(rows) + ", " +
                      std::to_string(cols) + ")");
  return {};
}

DeviceMatrix matrix_at(std::byte* data, const TensorView& t) {
  const std::optional<size_t> row_bytes = kernels::weight_bytes(t.dtype, static_cast<uint64_t>(t.cols));
  return {data, t.dtype, t.rows, t.cols, static_cast<int64_t>(row_bytes.value_or(0))};
}

// Where each view of a fused projection starts: one after another, except that
// a view whose dtype differs from the previous one starts a new part at a kAlign
// boundary (cuBLAS wants aligned float rows). Returns the total bytes.
size_t fused_layout(const std::vector<const TensorView*>& parts, std::vector<size_t>* offsets = nullptr) {
  size_t at = 0;
  const TensorView* prev = nullptr;
  for (const TensorView* t : parts) {
    if (prev != nullptr && prev->dtype != t->dtype) at = align_up(at);
    if (offsets) offsets->push_back(at);
    at += t->num_bytes();
    prev = t;
  }
  return at;
}

// Copies the views into `dst` as fused_layout() places them (they must share a
// column count); consecutive views of one dtype become one part.
Result<DeviceProjection> upload_rows(const Model& model, std::byte* dst, const std::vector<const TensorView*>& parts) {
  DeviceProjection p;
  p.cols = (*parts.begin())->cols;
  std::vector<size_t> offsets;
  fused_layout(parts, &offsets);
  size_t i = 0;
  for (const TensorView* t : parts) {
    const size_t offset = offsets[i++];
    if (t->cols != p.cols)
      return make_error(model.path + ": tensor " + t->name + " has " + std::to_string(t->cols) +
                        " columns; the tensors fused with it have " + std::to_string(p.cols));
    GB_CUDA_TRY(cudaMemcpy(dst + offset, t->data, t->num_bytes(), cudaMemcpyHostToDevice));
    DeviceMatrix* last = p.num_parts > 0 ? &p.parts[static_cast<size_t>(p.num_parts - 1)] : nullptr;
    if (last != nullptr && last->dtype == t->dtype) {
      last->rows += t->rows;
    } else {
      GB_CHECK(p.num_parts < DeviceProjection::kMaxParts);
      p.parts[static_cast<size_t>(p.num_parts++)] = matrix_at(dst + offset, *t);
    }
    p.rows += t->rows;
  }
  return p;
}

// Bytes an optional float32 vector takes in the arena (0 when absent).
size_t vector_bytes(const TensorView& t) {
  return t.data == nullptr ? 0 : align_up(static_cast<size_t>(t.num_elements()) * sizeof(float));
}

Status upload_norm(const TensorView& t, float* dst) {
  std::vector<float> host(static_cast<size_t>(t.num_elements()));
  kernels::weight_traits(t.dtype).dequantize_row(t.data, host.data(), t.num_elements());
  GB_CUDA_TRY(cudaMemcpy(dst, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  return {};
}

// The rows of the fused q|k|v projection: Phi-3's attn_qkv as stored, or q, k, v.
std::vector<const TensorView*> qkv_parts(const LayerWeights& l) {
  if (l.wqkv.data != nullptr) return {&l.wqkv};
  return {&l.wq, &l.wk, &l.wv};
}

// The rows of the fused gate|up projection: Phi-3's ffn_up (gate rows, then up
// rows) as stored, or gate then up.
std::vector<const TensorView*> gate_up_parts(const LayerWeights& l) {
  if (l.w_gate.data == nullptr) return {&l.w_up};
  return {&l.w_gate, &l.w_up};
}

// In DeviceLayer's order: bq, bk, bv, q_norm, k_norm, post_attn_norm, post_ffn_norm.
std::array<const TensorView*, 7> optional_vectors(const LayerWeights& l) {
  return {&l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm, &l.post_attn_norm, &l.post_ffn_norm};
}

// Every tensor of a block the config says it has, with the shape the forward pass uses.
Status check_layer_shapes(const Model& model, const LayerWeights& l) {
  const ModelConfig& c = model.config;
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim, kv_dim = c.kv_dim();
  GB_TRY(expect_shape(model, l.attn_norm, 1, c.dim));
  GB_TRY(expect_shape(model, l.ffn_norm, 1, c.dim));
  if (c.fused_qkv) {
    GB_TRY(expect_shape(model, l.wqkv, q_dim + 2 * kv_dim, c.dim));
  } else {
    GB_TRY(expect_shape(model, l.wq, q_dim, c.dim));
    GB_TRY(expect_shape(model, l.wk, kv_dim, c.dim));
    GB_TRY(expect_shape(model, l.wv, kv_dim, c.dim));
  }
  GB_TRY(expect_shape(model, l.wo, c.dim, q_dim));
  if (c.fused_gate_up) {
    GB_TRY(expect_shape(model, l.w_up, 2 * int64_t{c.hidden_dim}, c.dim));
  } else {
    GB_TRY(expect_shape(model, l.w_gate, c.hidden_dim, c.dim));
    GB_TRY(expect_shape(model, l.w_up, c.hidden_dim, c.dim));
  }
  GB_TRY(expect_shape(model, l.w_down, c.dim, c.hidden_dim));
  // Optional vectors, where present (the loader requires the ones the
  // architecture has; an absent one makes its recipe step the identity).
  const int64_t lengths[] = {q_dim, kv_dim, kv_dim, c.head_dim, c.head_dim, c.dim, c.dim};
  const auto vectors = optional_vectors(l);
  for (size_t i = 0; i < vectors.size(); ++i)
    if (vectors[i]->data != nullptr) GB_TRY(expect_shape(model, *vectors[i], 1, lengths[i]));
  return {};
}

// The arena's size: every piece starts at a kAlign boundary, in the order
// upload() takes them (embedding, classifier unless tied, output norm, RoPE
// frequencies, then per layer: norms, qkv, wo, gate/up, down, optional vectors).
size_t arena_bytes(const ModelWeights& w, bool tied, size_t norm_bytes) {
  size_t total = align_up(w.token_embedding.num_bytes()) + (tied ? 0 : align_up(w.classifier.num_bytes())) + norm_bytes;
  total += vector_bytes(w.rope_freqs);
  for (const LayerWeights& l : w.layers) {
    total += 2 * norm_bytes + align_up(fused_layout(qkv_parts(l))) + align_up(l.wo.num_bytes()) +
             align_up(fused_layout(gate_up_parts(l))) + align_up(l.w_down.num_bytes());
    for (const TensorView* v : optional_vectors(l)) total += vector_bytes(*v);
  }
  return total;
}

// Hands out kAlign-aligned pieces of the weight arena, in order.
struct ArenaCursor {
  std::byte* base = nullptr;
  size_t at = 0;  // bytes handed out so far
  std::byte* take(size_t bytes) {
    std::byte* p = base + at;
    at += align_up(bytes);
    return p;
  }
};

// One decoder layer: its norms, the fused qkv and gate/up projections, wo,
// w_down and the optional vectors (biases, head norms, post-norms) it has.
Result<DeviceLayer> upload_layer(const Model& model, const LayerWeights& l, ArenaCursor& arena, size_t norm_bytes) {
  DeviceLayer d;
  auto* attn_norm = reinterpret_cast<float*>(arena.take(norm_bytes));
  auto* ffn_norm = reinterpret_cast<float*>(arena.take(norm_bytes));
  GB_TRY(upload_norm(l.attn_norm, attn_norm));
  GB_TRY(upload_norm(l.ffn_norm, ffn_norm));
  d.attn_norm = attn_norm;
  d.ffn_norm = ffn_norm;
  Result<DeviceProjection> m = upload_rows(model, arena.take(fused_layout(qkv_parts(l))), qkv_parts(l));
  if (!m) return m.error();
  d.wqkv = *m;
  m = upload_rows(model, arena.take(l.wo.num_bytes()), {&l.wo});
  if (!m) return m.error();
  d.wo = *m;
  m = upload_rows(model, arena.take(fused_layout(gate_up_parts(l))), gate_up_parts(l));
  if (!m) return m.error();
  d.w_gate_up = *m;
  m = upload_rows(model, arena.take(l.w_down.num_bytes()), {&l.w_down});
  if (!m) return m.error();
  d.w_down = *m;
  const std::array<const float**, 7> vectors = {&d.bq, &d.bk, &d.bv, &d.q_norm, &d.k_norm, &d.post_attn_norm,
                                                &d.post_ffn_norm};
  const auto sources = optional_vectors(l);
  for (size_t i = 0; i < vectors.size(); ++i) {
    if (sources[i]->data == nullptr) continue;
    auto* dst = reinterpret_cast<float*>(arena.take(vector_bytes(*sources[i])));
    GB_TRY(upload_norm(*sources[i], dst));
    *vectors[i] = dst;
  }
  return d;
}

}  // namespace

Status check_weight_types(const Model& model) {
  for (const TensorView* t : model.all_tensors()) {
    if (!kernels::is_quantized(t->dtype) || quant_kernels_support(t->dtype)) continue;
    return make_error(model.path + ": tensor " + t->name + " is " + std::string(kernels::weight_traits(t->dtype).name) +
                      ", which the CUDA backend has no kernels for (use --device cpu)");
  }
  return {};
}

Status DeviceWeights::upload(const Model& model) {
  release();
  const ModelConfig& c = model.config;
  const ModelWeights& w = model.weights;
  if (static_cast<int32_t>(w.layers.size()) != c.num_layers)
    return make_error(model.path + ": layer count does not match the config");
  GB_TRY(expect_shape(model, w.token_embedding, c.vocab_size, c.dim));
  GB_TRY(expect_shape(model, w.classifier, c.vocab_size, c.dim));
  GB_TRY(expect_shape(model, w.output_norm, 1, c.dim));
  GB_TRY(check_weight_types(model));
  if (c.rope_freq_factors) GB_TRY(expect_shape(model, w.rope_freqs, 1, c.rope_dim / 2));
  for (const LayerWeights& l : w.layers) GB_TRY(check_layer_shapes(model, l));
  const bool tied = w.classifier.data == w.token_embedding.data && w.classifier.dtype == w.token_embedding.dtype;
  const size_t norm_bytes = align_up(static_cast<size_t>(c.dim) * sizeof(float));

  const size_t total = arena_bytes(w, tied, norm_bytes);
  GB_TRY(arena_.allocate(total, "model weights"));
  ArenaCursor arena{arena_.as<std::byte>()};

  Result<DeviceProjection> m = upload_rows(model, arena.take(w.token_embedding.num_bytes()), {&w.token_embedding});
  if (!m) return m.error();
  embedding_ = m->parts[0];
  if (tied) {
    classifier_ = *m;
  } else {
    m = upload_rows(model, arena.take(w.classifier.num_bytes()), {&w.classifier});
    if (!m) return m.error();
    classifier_ = *m;
  }
  auto* out_norm = reinterpret_cast<float*>(arena.take(norm_bytes));
  GB_TRY(upload_norm(w.output_norm, out_norm));
  output_norm_ = out_norm;
  if (w.rope_freqs.data != nullptr) {
    auto* freqs = reinterpret_cast<float*>(arena.take(vector_bytes(w.rope_freqs)));
    GB_TRY(upload_norm(w.rope_freqs, freqs));
    rope_freqs_ = freqs;
  }
  for (const LayerWeights& l : w.layers) {
    auto d = upload_layer(model, l, arena, norm_bytes);
    if (!d) return d.error();
    layers_.push_back(*d);
  }
  GB_CHECK(arena.at == total);
  return {};
}

}  // namespace gb::cuda
