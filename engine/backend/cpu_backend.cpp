#include "backend/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "cpu/convert.h"
#include "cpu/matmul.h"
#include "cpu/ops.h"
#include "cpu/paged_attention.h"

namespace gb {

namespace {

kernels::ElemType to_elem(DType t) {
  switch (t) {
    case DType::F32: return kernels::ElemType::F32;
    case DType::F16: return kernels::ElemType::F16;
    case DType::BF16: return kernels::ElemType::BF16;
  }
  return kernels::ElemType::F32;
}

// Converts one row of a weight tensor to float32.
void row_to_f32(const TensorView& t, int64_t r, float* out) {
  const std::byte* src = t.row(r);
  switch (t.dtype) {
    case DType::F32: std::memcpy(out, src, static_cast<size_t>(t.cols) * sizeof(float)); break;
    case DType::F16:
      kernels::f16_to_f32_row(reinterpret_cast<const uint16_t*>(src), out, static_cast<size_t>(t.cols));
      break;
    case DType::BF16:
      kernels::bf16_to_f32_row(reinterpret_cast<const uint16_t*>(src), out, static_cast<size_t>(t.cols));
      break;
  }
}

// Below this many multiply-adds a dispatch costs more than it saves (a wake-up
// is a few microseconds; 2^18 MACs take ~20 us on one core), so small products
// (stories260K's 64x64 matrices, single-token attention) run on the caller.
constexpr int64_t kMinParallelMacs = int64_t{1} << 18;

// x[i, :] += bias for each of n rows of width w (no-op without a bias).   x: (n, w)
void add_bias_rows(float* x, const TensorView& bias, int64_t n, int64_t w) {
  if (bias.data == nullptr) return;
  const auto* b = static_cast<const float*>(bias.data);  // loader hands biases out as F32
  for (int64_t i = 0; i < n; ++i) kernels::add_inplace(x + i * w, b, w);
}

// RoPE for the heads of one token: the llama2.c-exact kernel for plain adjacent
// pairs (keeps the stories goldens bit-identical), the general one otherwise.
void apply_rope(const ModelConfig& c, const TensorView& rope_freqs, float* v, int32_t num_heads, int32_t pos) {
  if (c.rope_style == RopeStyle::Adjacent && !c.rope_freq_factors) {
    kernels::rope(v, num_heads, c.head_dim, c.rope_dim, pos, c.rope_freq_base);
    return;
  }
  kernels::RopeParams p;
  p.rope_dim = c.rope_dim;
  p.base = c.rope_freq_base;
  p.style = c.rope_style == RopeStyle::NeoX ? kernels::RopeStyle::NeoX : kernels::RopeStyle::Adjacent;
  p.freq_factors = c.rope_freq_factors ? static_cast<const float*>(rope_freqs.data) : nullptr;
  kernels::rope_ex(v, num_heads, c.head_dim, pos, p);
}

template <class T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

CpuBackend::CpuBackend(std::shared_ptr<const Model> model, const CpuBackendOptions& options)
    : model_(std::move(model)), pool_(options.num_threads) {
  const ModelConfig& c = model_->config;
  const auto append_norm = [this](const TensorView& t) {
    const int64_t offset = static_cast<int64_t>(norm_weights_.size());
    norm_weights_.resize(norm_weights_.size() + static_cast<size_t>(t.cols));
    row_to_f32(t, 0, norm_weights_.data() + offset);
    return offset;
  };
  for (int32_t l = 0; l < c.num_layers; ++l) {
    attn_norm_offset_.push_back(append_norm(model_->weights.layers[static_cast<size_t>(l)].attn_norm));
    ffn_norm_offset_.push_back(append_norm(model_->weights.layers[static_cast<size_t>(l)].ffn_norm));
  }
  output_norm_offset_ = append_norm(model_->weights.output_norm);
}

Status CpuBackend::init_kv_pool(const KvPoolSpec& spec) {
  if (spec.num_blocks <= 0 || spec.block_size <= 0)
    return make_error("KV pool needs at least one block of at least one token");
  const ModelConfig& c = model_->config;
  const size_t per_layer = static_cast<size_t>(spec.num_blocks) * static_cast<size_t>(spec.block_size) *
                           static_cast<size_t>(c.kv_dim());
  kv_spec_ = spec;
  k_cache_.assign(static_cast<size_t>(c.num_layers), std::vector<float>(per_layer, 0.0f));
  v_cache_.assign(static_cast<size_t>(c.num_layers), std::vector<float>(per_layer, 0.0f));
  return {};
}

size_t CpuBackend::kv_pool_bytes() const {
  size_t bytes = 0;
  for (const auto& k : k_cache_) bytes += k.size() * sizeof(float);
  for (const auto& v : v_cache_) bytes += v.size() * sizeof(float);
  return bytes;
}

void CpuBackend::matmul_group(std::initializer_list<std::pair<const TensorView*, float*>> mats, const float* x,
                              int64_t num_tokens) {
  // Concatenate the row ranges of all matrices and split the total across threads
  // in multiples of 4 rows (the kernel's tile height).
  int64_t total = 0;
  for (const auto& m : mats) total += m.first->rows;
  const auto run = [&](int64_t begin, int64_t end, int) {
    int64_t base = 0;
    for (const auto& [w, y] : mats) {
      const int64_t lo = std::max(begin, base), hi = std::min(end, base + w->rows);
      if (lo < hi)
        kernels::matmul(y, w->rows, x, w->data, to_elem(w->dtype), num_tokens, w->cols, lo - base, hi - base);
      base += w->rows;
    }
  };
  const int64_t macs = total * mats.begin()->first->cols * num_tokens;
  if (macs < kMinParallelMacs) run(0, total, 0);
  else pool_.parallel_for(total, run, 4);
}

void CpuBackend::attention(const BatchLayout& batch, int32_t layer) {
  const ModelConfig& c = model_->config;
  const int32_t num_tokens = batch.num_tokens();
  const int32_t q_dim = c.num_heads * c.head_dim;
  const int32_t group = c.num_heads / c.num_kv_heads;
  int32_t max_ctx = 0;
  for (int32_t s = 0; s < batch.num_seqs(); ++s) max_ctx = std::max(max_ctx, batch.seq_kv_len[static_cast<size_t>(s)]);
  grow(scores_, static_cast<size_t>(pool_.num_threads()) * static_cast<size_t>(max_ctx));
  // Sequence of each token, from the CSR offsets.
  std::vector<int32_t> seq_of(static_cast<size_t>(num_tokens));
  for (int32_t s = 0; s < batch.num_seqs(); ++s)
    for (int32_t i = batch.seq_token_indptr[static_cast<size_t>(s)]; i < batch.seq_token_indptr[static_cast<size_t>(s) + 1]; ++i)
      seq_of[static_cast<size_t>(i)] = s;
  const int64_t num_tasks = static_cast<int64_t>(num_tokens) * c.num_heads;
  const auto run = [&](int64_t begin, int64_t end, int thread) {
    float* scores = scores_.data() + static_cast<size_t>(thread) * static_cast<size_t>(max_ctx);
    for (int64_t task = begin; task < end; ++task) {
      const int32_t i = static_cast<int32_t>(task / c.num_heads);
      const int32_t h = static_cast<int32_t>(task % c.num_heads);
      const int32_t s = seq_of[static_cast<size_t>(i)];
      kernels::PagedKvView kv;
      kv.k_cache = k_cache_[static_cast<size_t>(layer)].data();
      kv.v_cache = v_cache_[static_cast<size_t>(layer)].data();
      kv.block_table = batch.block_ids.data() + batch.block_indptr[static_cast<size_t>(s)];
      kv.block_size = batch.block_size;
      kv.num_kv_heads = c.num_kv_heads;
      kv.head_dim = c.head_dim;
      const size_t qo = static_cast<size_t>(i) * q_dim + static_cast<size_t>(h) * c.head_dim;
      kernels::paged_attention_head(att_.data() + qo, q_.data() + qo, kv, h / group,
                                    batch.positions[static_cast<size_t>(i)] + 1, scores);
    }
  };
  const int64_t macs = num_tasks * max_ctx * c.head_dim * 2;
  if (macs < kMinParallelMacs) run(0, num_tasks, 0);
  else pool_.parallel_for(num_tasks, run);
}

Status CpuBackend::validate(const BatchLayout& batch, std::span<float> logits) const {
  const ModelConfig& c = model_->config;
  if (k_cache_.empty()) return make_error("forward called before the KV pool was initialised");
  if (batch.block_size != kv_spec_.block_size)
    return make_error("batch block size " + std::to_string(batch.block_size) + " differs from the KV pool's " +
                      std::to_string(kv_spec_.block_size));
  for (TokenId t : batch.token_ids)
    if (t < 0 || t >= c.vocab_size)
      return make_error("token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                        std::to_string(c.vocab_size - 1) + ")");
  for (int32_t b : batch.block_ids) GB_CHECK(b >= 0 && b < kv_spec_.num_blocks);
  GB_CHECK(logits.size() >= static_cast<size_t>(batch.num_logits()) * static_cast<size_t>(c.vocab_size));
  GB_CHECK(batch.num_layers <= c.num_layers);
  return {};
}

Status CpuBackend::forward(const BatchLayout& batch, std::span<float> logits) {
  GB_TRY(validate(batch, logits));
  const ModelConfig& c = model_->config;
  const ModelWeights& w = model_->weights;
  const int64_t n = batch.num_tokens();
  if (n == 0) return {};
  const int64_t dim = c.dim, kv_dim = c.kv_dim(), q_dim = int64_t{c.num_heads} * c.head_dim, hidden = c.hidden_dim;
  grow(x_, n * dim); grow(xb_, n * dim); grow(q_, n * q_dim); grow(k_, n * kv_dim); grow(v_, n * kv_dim);
  grow(att_, n * q_dim); grow(proj_, n * dim); grow(gate_, n * hidden); grow(up_, n * hidden);

  for (int64_t i = 0; i < n; ++i) row_to_f32(w.token_embedding, batch.token_ids[static_cast<size_t>(i)], x_.data() + i * dim);

  const int32_t num_layers = batch.num_layers < 0 ? c.num_layers : batch.num_layers;
  for (int32_t l = 0; l < num_layers; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    const float* attn_norm = norm_weights_.data() + attn_norm_offset_[static_cast<size_t>(l)];
    for (int64_t i = 0; i < n; ++i) kernels::rmsnorm(xb_.data() + i * dim, x_.data() + i * dim, attn_norm, dim, c.rms_eps);
    matmul_group({{&lw.wq, q_.data()}, {&lw.wk, k_.data()}, {&lw.wv, v_.data()}}, xb_.data(), n);
    add_bias_rows(q_.data(), lw.bq, n, q_dim);
    add_bias_rows(k_.data(), lw.bk, n, kv_dim);
    add_bias_rows(v_.data(), lw.bv, n, kv_dim);

    // RoPE, then store K and V in the slots the block tables name.
    float* kc = k_cache_[static_cast<size_t>(l)].data();
    float* vc = v_cache_[static_cast<size_t>(l)].data();
    for (int32_t s = 0; s < batch.num_seqs(); ++s) {
      const int32_t* table = batch.block_ids.data() + batch.block_indptr[static_cast<size_t>(s)];
      for (int32_t i = batch.seq_token_indptr[static_cast<size_t>(s)]; i < batch.seq_token_indptr[static_cast<size_t>(s) + 1]; ++i) {
        const int32_t pos = batch.positions[static_cast<size_t>(i)];
        apply_rope(c, w.rope_freqs, q_.data() + i * q_dim, c.num_heads, pos);
        apply_rope(c, w.rope_freqs, k_.data() + i * kv_dim, c.num_kv_heads, pos);
        const int64_t slot = int64_t{table[pos / batch.block_size]} * batch.block_size + pos % batch.block_size;
        std::memcpy(kc + slot * kv_dim, k_.data() + i * kv_dim, static_cast<size_t>(kv_dim) * sizeof(float));
        std::memcpy(vc + slot * kv_dim, v_.data() + i * kv_dim, static_cast<size_t>(kv_dim) * sizeof(float));
      }
    }
    attention(batch, l);
    matmul_group({{&lw.wo, proj_.data()}}, att_.data(), n);
    kernels::add_inplace(x_.data(), proj_.data(), n * dim);

    const float* ffn_norm = norm_weights_.data() + ffn_norm_offset_[static_cast<size_t>(l)];
    for (int64_t i = 0; i < n; ++i) kernels::rmsnorm(xb_.data() + i * dim, x_.data() + i * dim, ffn_norm, dim, c.rms_eps);
    matmul_group({{&lw.w_gate, gate_.data()}, {&lw.w_up, up_.data()}}, xb_.data(), n);
    // Row by row, so each token's activations take the same SIMD/tail path
    // whatever else is in the batch (batched = alone, bit for bit).
    for (int64_t i = 0; i < n; ++i)
      kernels::swiglu(gate_.data() + i * hidden, gate_.data() + i * hidden, up_.data() + i * hidden, hidden);
    matmul_group({{&lw.w_down, proj_.data()}}, gate_.data(), n);
    kernels::add_inplace(x_.data(), proj_.data(), n * dim);
  }

  const int64_t num_logits = batch.num_logits();
  if (num_logits == 0) return {};
  grow(final_, num_logits * dim);
  const float* out_norm = norm_weights_.data() + output_norm_offset_;
  for (int64_t j = 0; j < num_logits; ++j) {
    const int64_t i = batch.logit_token_indices[static_cast<size_t>(j)];
    kernels::rmsnorm(final_.data() + j * dim, x_.data() + i * dim, out_norm, dim, c.rms_eps);
  }
  matmul_group({{&w.classifier, logits.data()}}, final_.data(), num_logits);
  return {};
}

Status CpuBackend::copy_blocks(std::span<const std::pair<int32_t, int32_t>> src_dst) {
  const size_t block_floats = static_cast<size_t>(kv_spec_.block_size) * static_cast<size_t>(model_->config.kv_dim());
  for (const auto& [src, dst] : src_dst) {
    GB_CHECK(src >= 0 && src < kv_spec_.num_blocks && dst >= 0 && dst < kv_spec_.num_blocks);
    for (size_t l = 0; l < k_cache_.size(); ++l) {
      std::memcpy(k_cache_[l].data() + static_cast<size_t>(dst) * block_floats,
                  k_cache_[l].data() + static_cast<size_t>(src) * block_floats, block_floats * sizeof(float));
      std::memcpy(v_cache_[l].data() + static_cast<size_t>(dst) * block_floats,
                  v_cache_[l].data() + static_cast<size_t>(src) * block_floats, block_floats * sizeof(float));
    }
  }
  return {};
}

Status CpuBackend::read_kv_slot(int32_t layer, int32_t block, int32_t slot, std::span<float> k,
                                std::span<float> v) const {
  const size_t kv_dim = static_cast<size_t>(model_->config.kv_dim());
  if (layer < 0 || layer >= static_cast<int32_t>(k_cache_.size()) || block < 0 || block >= kv_spec_.num_blocks ||
      slot < 0 || slot >= kv_spec_.block_size || k.size() < kv_dim || v.size() < kv_dim)
    return make_error("read_kv_slot: layer/block/slot out of range");
  const size_t offset = (static_cast<size_t>(block) * static_cast<size_t>(kv_spec_.block_size) + static_cast<size_t>(slot)) * kv_dim;
  std::memcpy(k.data(), k_cache_[static_cast<size_t>(layer)].data() + offset, kv_dim * sizeof(float));
  std::memcpy(v.data(), v_cache_[static_cast<size_t>(layer)].data() + offset, kv_dim * sizeof(float));
  return {};
}

DeviceInfo CpuBackend::device_info() const {
  DeviceInfo info;
  info.backend = "cpu";
  info.name = kernels::matmul_has_simd() ? "CPU (AVX2/FMA)" : "CPU (scalar)";
  info.memory_used_bytes = kv_pool_bytes() + model_->weight_bytes();
  info.num_threads = pool_.num_threads();
  return info;
}

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const Model> model, const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(std::move(model), options);
}

}  // namespace gb
