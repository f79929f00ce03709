#include "backend/cuda/device_weights.h"

#include <cstdint>
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
size_t fused_layout(std::initializer_list<const TensorView*> parts, std::vector<size_t>* offsets = nullptr) {
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
Result<DeviceProjection> upload_rows(const Model& model, std::byte* dst,
                                     std::initializer_list<const TensorView*> parts) {
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

Status upload_norm(const TensorView& t, float* dst) {
  std::vector<float> host(static_cast<size_t>(t.num_elements()));
  kernels::weight_traits(t.dtype).dequantize_row(t.data, host.data(), t.num_elements());
  GB_CUDA_TRY(cudaMemcpy(dst, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  return {};
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
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim, kv_dim = c.kv_dim();
  if (static_cast<int32_t>(w.layers.size()) != c.num_layers)
    return make_error(model.path + ": layer count does not match the config");
  GB_TRY(expect_shape(model, w.token_embedding, c.vocab_size, c.dim));
  GB_TRY(expect_shape(model, w.classifier, c.vocab_size, c.dim));
  GB_TRY(expect_shape(model, w.output_norm, 1, c.dim));
  GB_TRY(check_weight_types(model));
  for (const LayerWeights& l : w.layers) {
    GB_TRY(expect_shape(model, l.attn_norm, 1, c.dim));
    GB_TRY(expect_shape(model, l.ffn_norm, 1, c.dim));
    GB_TRY(expect_shape(model, l.wq, q_dim, c.dim));
    GB_TRY(expect_shape(model, l.wk, kv_dim, c.dim));
    GB_TRY(expect_shape(model, l.wv, kv_dim, c.dim));
    GB_TRY(expect_shape(model, l.wo, c.dim, q_dim));
    GB_TRY(expect_shape(model, l.w_gate, c.hidden_dim, c.dim));
    GB_TRY(expect_shape(model, l.w_up, c.hidden_dim, c.dim));
    GB_TRY(expect_shape(model, l.w_down, c.dim, c.hidden_dim));
  }
  const bool tied = w.classifier.data == w.token_embedding.data && w.classifier.dtype == w.token_embedding.dtype;
  const size_t norm_bytes = align_up(static_cast<size_t>(c.dim) * sizeof(float));

  // Plan the arena: every piece starts at a kAlign boundary.
  size_t total = align_up(w.token_embedding.num_bytes()) + (tied ? 0 : align_up(w.classifier.num_bytes())) + norm_bytes;
  for (const LayerWeights& l : w.layers) {
    total += 2 * norm_bytes + align_up(fused_layout({&l.wq, &l.wk, &l.wv})) + align_up(l.wo.num_bytes()) +
             align_up(fused_layout({&l.w_gate, &l.w_up})) + align_up(l.w_down.num_bytes());
  }
  GB_TRY(arena_.allocate(total, "model weights"));
  auto* base = arena_.as<std::byte>();
  size_t at = 0;
  auto take = [&](size_t bytes) {
    std::byte* p = base + at;
    at += align_up(bytes);
    return p;
  };

  std::byte* emb = take(w.token_embedding.num_bytes());
  Result<DeviceProjection> m = upload_rows(model, emb, {&w.token_embedding});
  if (!m) return m.error();
  embedding_ = m->parts[0];
  if (tied) {
    classifier_ = *m;
  } else {
    m = upload_rows(model, take(w.classifier.num_bytes()), {&w.classifier});
    if (!m) return m.error();
    classifier_ = *m;
  }
  auto* out_norm = reinterpret_cast<float*>(take(norm_bytes));
  GB_TRY(upload_norm(w.output_norm, out_norm));
  output_norm_ = out_norm;

  for (const LayerWeights& l : w.layers) {
    DeviceLayer d;
    auto* attn_norm = reinterpret_cast<float*>(take(norm_bytes));
    auto* ffn_norm = reinterpret_cast<float*>(take(norm_bytes));
    GB_TRY(upload_norm(l.attn_norm, attn_norm));
    GB_TRY(upload_norm(l.ffn_norm, ffn_norm));
    d.attn_norm = attn_norm;
    d.ffn_norm = ffn_norm;
    m = upload_rows(model, take(fused_layout({&l.wq, &l.wk, &l.wv})), {&l.wq, &l.wk, &l.wv});
    if (!m) return m.error();
    d.wqkv = *m;
    m = upload_rows(model, take(l.wo.num_bytes()), {&l.wo});
    if (!m) return m.error();
    d.wo = *m;
    m = upload_rows(model, take(fused_layout({&l.w_gate, &l.w_up})), {&l.w_gate, &l.w_up});
    if (!m) return m.error();
    d.w_gate_up = *m;
    m = upload_rows(model, take(l.w_down.num_bytes()), {&l.w_down});
    if (!m) return m.error();
    d.w_down = *m;
    layers_.push_back(d);
  }
  GB_CHECK(at == total);
  return {};
}

}  // namespace gb::cuda
