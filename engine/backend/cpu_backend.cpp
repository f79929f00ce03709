#include "backend/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/cpu_info.h"
#include "cpu/matmul.h"
#include "cpu/matmul_quant.h"
#include "cpu/ops.h"
#include "cpu/paged_attention.h"

namespace gb {

namespace {

// Converts one row of a weight tensor (any type in the weight-type table) to float32.
void row_to_f32(const TensorView& t, int64_t r, float* out) {
  kernels::weight_traits(t.dtype).dequantize_row(t.row(r), out, t.cols);
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

// RoPE for the heads of one token at a layer: the llama2.c-exact kernel for plain
// adjacent pairs (keeps the stories goldens bit-identical), the general one
// otherwise. Sliding layers may have their own base (Gemma 3) and no linear scaling.
void apply_rope(const ModelConfig& c, const TensorView& rope_freqs, bool sliding, float* v, int32_t num_heads,
                int32_t pos) {
  const float base = sliding && c.rope_freq_base_swa > 0.0f ? c.rope_freq_base_swa : c.rope_freq_base;
  const float scale = sliding ? 1.0f : c.rope_freq_scale;
  if (c.rope_style == RopeStyle::Adjacent && !c.rope_freq_factors && scale == 1.0f && c.rope_attn_factor == 1.0f) {
    kernels::rope(v, num_heads, c.head_dim, c.rope_dim, pos, base);
    return;
  }
  kernels::RopeParams p;
  p.rope_dim = c.rope_dim;
  p.base = base;
  p.style = c.rope_style == RopeStyle::NeoX ? kernels::RopeStyle::NeoX : kernels::RopeStyle::Adjacent;
  p.freq_factors = c.rope_freq_factors ? static_cast<const float*>(rope_freqs.data) : nullptr;
  p.freq_scale = scale;
  p.attn_factor = c.rope_attn_factor;
  kernels::rope_ex(v, num_heads, c.head_dim, pos, p);
}

// In-place RMSNorm of n rows of width w with one weight vector (F32, as the
// loader hands out vectors); no-op when the tensor is absent.   x: (n, w)
void norm_rows(float* x, const TensorView& weight, int64_t n, int64_t w, float eps) {
  if (weight.data == nullptr) return;
  const auto* g = static_cast<const float*>(weight.data);
  for (int64_t i = 0; i < n; ++i) kernels::rmsnorm(x + i * w, x + i * w, g, w, eps);
}

// out = act(gate) * up for one row of the gated FFN.
void gated_activation(FfnActivation act, float* out, const float* gate, const float* up, int64_t n) {
  if (act == FfnActivation::GeluTanh) kernels::gelu_tanh_gated(out, gate, up, n);
  else kernels::swiglu(out, gate, up, n);
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
  const int64_t cols = mats.begin()->first->cols;
  // Quantized weights want 8-bit activations: quantize x once for the whole
  // group, before the rows are split across threads.
  kernels::MatmulInput in{x, nullptr};
  bool wants_q8 = false;
  for (const auto& m : mats) wants_q8 |= kernels::weight_traits(m.first->dtype).activation == kernels::ActivationType::Q8;
  if (wants_q8) {
    grow(xq_, static_cast<size_t>(num_tokens * cols / kernels::kActBlock));
    const auto quantize = [&](int64_t begin, int64_t end, int) {
      kernels::quantize_activations(x, cols, begin, end, xq_.data());
    };
    if (num_tokens * cols < kMinParallelMacs / 16) quantize(0, num_tokens, 0);
    else pool_.parallel_for(num_tokens, quantize);
    in.q8 = xq_.data();
  }
  // Concatenate the row ranges of all matrices and split the total across threads
  // in multiples of 4 rows (the float kernel's tile height).
  int64_t total = 0;
  for (const auto& m : mats) total += m.first->rows;
  const auto run = [&](int64_t begin, int64_t end, int) {
    int64_t base = 0;
    for (const auto& [w, y] : mats) {
      const int64_t lo = std::max(begin, base), hi = std::min(end, base + w->rows);
      if (lo < hi)
        kernels::matmul_weights(y, w->rows, in, w->data, static_cast<int64_t>(w->row_bytes()),
                                kernels::weight_traits(w->dtype), num_tokens, w->cols, lo - base, hi - base);
      base += w->rows;
    }
  };
  const int64_t macs = total * cols * num_tokens;
  if (macs < kMinParallelMacs) run(0, total, 0);
  else pool_.parallel_for(total, run, 4);
}

namespace {
// Queries per attention task: the query heads of one KV head's GQA group at
// up to kAttentionQueries / group consecutive positions of one sequence, so
// each K and V row is read once for all of them.
constexpr int32_t kAttentionQueries = 32;
static_assert(kAttentionQueries <= kernels::kMaxAttentionGroup);

struct AttentionTile {
  int32_t seq, begin, end;  // tokens [begin, end) of the batch, all of sequence seq
};

// Tiles of consecutive tokens per sequence, ordered first, last, second,
// second-to-last ...: a causal tile's cost grows with its position, and the
// thread pool hands each thread a contiguous run of tasks, so neighbouring
// pairs of equal total cost keep the threads level.
std::vector<AttentionTile> attention_tiles(const BatchLayout& batch, int32_t tile) {
  std::vector<AttentionTile> tiles;
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    const int32_t end = batch.seq_token_indptr[static_cast<size_t>(s) + 1];
    for (int32_t i = batch.seq_token_indptr[static_cast<size_t>(s)]; i < end; i += tile)
      tiles.push_back({s, i, std::min(i + tile, end)});
  }
  std::vector<AttentionTile> order;
  order.reserve(tiles.size());
  for (size_t lo = 0, hi = tiles.size(); lo < hi;) {
    order.push_back(tiles[lo++]);
    if (lo < hi) order.push_back(tiles[--hi]);
  }
  return order;
}
}  // namespace

void CpuBackend::attention(const BatchLayout& batch, int32_t layer) {
  const ModelConfig& c = model_->config;
  const int32_t q_dim = c.num_heads * c.head_dim;
  const int32_t group = c.num_heads / c.num_kv_heads;
  const bool sliding = c.is_sliding(layer);
  int32_t max_ctx = 0;
  for (int32_t s = 0; s < batch.num_seqs(); ++s) max_ctx = std::max(max_ctx, batch.seq_kv_len[static_cast<size_t>(s)]);
  const int32_t positions_per_tile = std::max(1, kAttentionQueries / group);
  const int32_t queries_per_task = std::min(group, kAttentionQueries) * positions_per_tile;
  grow(scores_, static_cast<size_t>(pool_.num_threads()) * static_cast<size_t>(queries_per_task) *
                    static_cast<size_t>(max_ctx));
  const std::vector<AttentionTile> tiles = attention_tiles(batch, positions_per_tile);
  // Heads of a group beyond kAttentionQueries (group > 32) go in several tasks.
  const int32_t head_parts = (group + kAttentionQueries - 1) / kAttentionQueries;
  const int64_t tasks_per_tile = static_cast<int64_t>(c.num_kv_heads) * head_parts;
  const int64_t num_tasks = static_cast<int64_t>(tiles.size()) * tasks_per_tile;
  const auto run = [&](int64_t begin, int64_t end, int thread) {
    float* scores = scores_.data() + static_cast<size_t>(thread) * static_cast<size_t>(queries_per_task) *
                                         static_cast<size_t>(max_ctx);
    kernels::AttentionQuery queries[kAttentionQueries];
    for (int64_t task = begin; task < end; ++task) {
      const AttentionTile& tile = tiles[static_cast<size_t>(task / tasks_per_tile)];
      const int32_t kv_head = static_cast<int32_t>(task % tasks_per_tile) / head_parts;
      const int32_t part = static_cast<int32_t>(task % tasks_per_tile) % head_parts;
      const int32_t h_begin = kv_head * group + part * kAttentionQueries;
      const int32_t h_end = std::min(kv_head * group + group, h_begin + kAttentionQueries);
      kernels::PagedKvView kv;
      kv.k_cache = k_cache_[static_cast<size_t>(layer)].data();
      kv.v_cache = v_cache_[static_cast<size_t>(layer)].data();
      kv.block_table = batch.block_ids.data() + batch.block_indptr[static_cast<size_t>(tile.seq)];
      kv.block_size = batch.block_size;
      kv.num_kv_heads = c.num_kv_heads;
      kv.head_dim = c.head_dim;
      int32_t m = 0;
      for (int32_t i = tile.begin; i < tile.end; ++i) {
        const int32_t pos = batch.positions[static_cast<size_t>(i)];
        const int32_t first = sliding ? std::max(0, pos - c.sliding_window + 1) : 0;
        for (int32_t h = h_begin; h < h_end; ++h) {
          const size_t qo = static_cast<size_t>(i) * q_dim + static_cast<size_t>(h) * c.head_dim;
          queries[m++] = {q_.data() + qo, att_.data() + qo, first, pos + 1};
        }
      }
      kernels::paged_attention_group(queries, m, kv, kv_head, c.attn_scale, c.attn_softcap, scores, max_ctx);
    }
  };
  const int64_t macs = static_cast<int64_t>(batch.num_tokens()) * c.num_heads * max_ctx * c.head_dim * 2;
  if (macs < kMinParallelMacs) run(0, num_tasks, 0);
  else pool_.parallel_for(num_tasks, run);
}

namespace {
// Every block a query of `batch` reads or a new token is written to is present:
// positions first_new - window + 1 .. kv_len - 1 of each sequence (all of them
// when window is 0, i.e. some layer reads the whole context).
Status check_released_slots(const BatchLayout& batch, int32_t window) {
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    const auto su = static_cast<size_t>(s);
    const int32_t kv_len = batch.seq_kv_len[su];
    if (kv_len <= 0 || batch.seq_token_indptr[su] == batch.seq_token_indptr[su + 1]) continue;
    const int32_t first_new = batch.positions[static_cast<size_t>(batch.seq_token_indptr[su])];
    const int32_t first_read = window > 0 ? std::max(0, first_new - window + 1) : 0;
    for (int32_t blk = first_read / batch.block_size; blk <= (kv_len - 1) / batch.block_size; ++blk)
      if (batch.block_ids[static_cast<size_t>(batch.block_indptr[su] + blk)] < 0)
        return make_error("sequence " + std::to_string(s) + ": block " + std::to_string(blk) +
                          " of its table was released by the sliding window but position " +
                          std::to_string(std::max(first_read, blk * batch.block_size)) + " is still read");
  }
  return {};
}
}  // namespace

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
  // -1 marks a block the sliding window released (kv/block_table.h): allowed
  // only where no query of this batch reads.
  for (int32_t b : batch.block_ids) GB_CHECK(b >= -1 && b < kv_spec_.num_blocks);
  GB_TRY(check_released_slots(batch, c.kv_release_window()));
  GB_CHECK(logits.size() >= static_cast<size_t>(batch.num_logits()) * static_cast<size_t>(c.vocab_size));
  GB_CHECK(batch.num_layers <= c.num_layers);
  return {};
}

// q, k, v of every token: one fused matrix split by rows (Phi-3), or three
// (with optional biases), then the optional per-head q/k norms.
void CpuBackend::project_qkv(const LayerWeights& lw, int64_t n) {
  const ModelConfig& c = model_->config;
  const int64_t kv_dim = c.kv_dim(), q_dim = int64_t{c.num_heads} * c.head_dim;
  if (c.fused_qkv) {
    const int64_t width = q_dim + 2 * kv_dim;
    grow(qkv_, static_cast<size_t>(n * width));
    matmul_group({{&lw.wqkv, qkv_.data()}}, xb_.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float* row = qkv_.data() + i * width;
      std::memcpy(q_.data() + i * q_dim, row, static_cast<size_t>(q_dim) * sizeof(float));
      std::memcpy(k_.data() + i * kv_dim, row + q_dim, static_cast<size_t>(kv_dim) * sizeof(float));
      std::memcpy(v_.data() + i * kv_dim, row + q_dim + kv_dim, static_cast<size_t>(kv_dim) * sizeof(float));
    }
  } else {
    matmul_group({{&lw.wq, q_.data()}, {&lw.wk, k_.data()}, {&lw.wv, v_.data()}}, xb_.data(), n);
    add_bias_rows(q_.data(), lw.bq, n, q_dim);
    add_bias_rows(k_.data(), lw.bk, n, kv_dim);
    add_bias_rows(v_.data(), lw.bv, n, kv_dim);
  }
  norm_rows(q_.data(), lw.q_norm, n * c.num_heads, c.head_dim, c.rms_eps);
  norm_rows(k_.data(), lw.k_norm, n * c.num_kv_heads, c.head_dim, c.rms_eps);
}

void CpuBackend::attention_block(const BatchLayout& batch, int32_t l) {
  const ModelConfig& c = model_->config;
  const LayerWeights& lw = model_->weights.layers[static_cast<size_t>(l)];
  const int64_t n = batch.num_tokens();
  const int64_t dim = c.dim, kv_dim = c.kv_dim(), q_dim = int64_t{c.num_heads} * c.head_dim;
  const float* attn_norm = norm_weights_.data() + attn_norm_offset_[static_cast<size_t>(l)];
  for (int64_t i = 0; i < n; ++i) kernels::rmsnorm(xb_.data() + i * dim, x_.data() + i * dim, attn_norm, dim, c.rms_eps);
  project_qkv(lw, n);

  // RoPE, then store K and V in the slots the block tables name.
  const bool sliding = c.is_sliding(l);
  float* kc = k_cache_[static_cast<size_t>(l)].data();
  float* vc = v_cache_[static_cast<size_t>(l)].data();
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    const int32_t* table = batch.block_ids.data() + batch.block_indptr[static_cast<size_t>(s)];
    for (int32_t i = batch.seq_token_indptr[static_cast<size_t>(s)]; i < batch.seq_token_indptr[static_cast<size_t>(s) + 1]; ++i) {
      const int32_t pos = batch.positions[static_cast<size_t>(i)];
      apply_rope(c, model_->weights.rope_freqs, sliding, q_.data() + i * q_dim, c.num_heads, pos);
      apply_rope(c, model_->weights.rope_freqs, sliding, k_.data() + i * kv_dim, c.num_kv_heads, pos);
      const int64_t slot = int64_t{table[pos / batch.block_size]} * batch.block_size + pos % batch.block_size;
      std::memcpy(kc + slot * kv_dim, k_.data() + i * kv_dim, static_cast<size_t>(kv_dim) * sizeof(float));
      std::memcpy(vc + slot * kv_dim, v_.data() + i * kv_dim, static_cast<size_t>(kv_dim) * sizeof(float));
    }
  }
  attention(batch, l);
  matmul_group({{&lw.wo, proj_.data()}}, att_.data(), n);
  norm_rows(proj_.data(), lw.post_attn_norm, n, dim, c.rms_eps);
  kernels::add_inplace(x_.data(), proj_.data(), n * dim);
}

void CpuBackend::ffn_block(int32_t l, int64_t n) {
  const ModelConfig& c = model_->config;
  const LayerWeights& lw = model_->weights.layers[static_cast<size_t>(l)];
  const int64_t dim = c.dim, hidden = c.hidden_dim;
  const float* ffn_norm = norm_weights_.data() + ffn_norm_offset_[static_cast<size_t>(l)];
  for (int64_t i = 0; i < n; ++i) kernels::rmsnorm(xb_.data() + i * dim, x_.data() + i * dim, ffn_norm, dim, c.rms_eps);
  // Row by row, so each token's activations take the same SIMD/tail path
  // whatever else is in the batch (batched = alone, bit for bit).
  if (c.fused_gate_up) {
    // gate_ holds (n, 2 hidden): each row's gate half, then its up half.
    matmul_group({{&lw.w_up, gate_.data()}}, xb_.data(), n);
    for (int64_t i = 0; i < n; ++i)
      gated_activation(c.activation, up_.data() + i * hidden, gate_.data() + i * 2 * hidden,
                       gate_.data() + i * 2 * hidden + hidden, hidden);
    matmul_group({{&lw.w_down, proj_.data()}}, up_.data(), n);
  } else {
    matmul_group({{&lw.w_gate, gate_.data()}, {&lw.w_up, up_.data()}}, xb_.data(), n);
    for (int64_t i = 0; i < n; ++i)
      gated_activation(c.activation, gate_.data() + i * hidden, gate_.data() + i * hidden, up_.data() + i * hidden,
                       hidden);
    matmul_group({{&lw.w_down, proj_.data()}}, gate_.data(), n);
  }
  norm_rows(proj_.data(), lw.post_ffn_norm, n, dim, c.rms_eps);
  kernels::add_inplace(x_.data(), proj_.data(), n * dim);
}

Status CpuBackend::forward(const BatchLayout& batch, std::span<float> logits) {
  GB_TRY(validate(batch, logits));
  const ModelConfig& c = model_->config;
  const ModelWeights& w = model_->weights;
  const int64_t n = batch.num_tokens();
  if (n == 0) return {};
  const int64_t dim = c.dim, kv_dim = c.kv_dim(), q_dim = int64_t{c.num_heads} * c.head_dim, hidden = c.hidden_dim;
  const int64_t gate_width = c.fused_gate_up ? 2 * hidden : hidden;
  grow(x_, n * dim); grow(xb_, n * dim); grow(q_, n * q_dim); grow(k_, n * kv_dim); grow(v_, n * kv_dim);
  grow(att_, n * q_dim); grow(proj_, n * dim); grow(gate_, n * gate_width); grow(up_, n * hidden);

  for (int64_t i = 0; i < n; ++i) row_to_f32(w.token_embedding, batch.token_ids[static_cast<size_t>(i)], x_.data() + i * dim);
  if (c.embed_scale != 1.0f)
    for (int64_t i = 0; i < n * dim; ++i) x_[static_cast<size_t>(i)] *= c.embed_scale;

  const int32_t num_layers = batch.num_layers < 0 ? c.num_layers : batch.num_layers;
  for (int32_t l = 0; l < num_layers; ++l) {
    attention_block(batch, l);
    ffn_block(l, n);
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
  if (c.final_softcap > 0.0f) kernels::softcap_inplace(logits.data(), num_logits * c.vocab_size, c.final_softcap);
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
  info.name = std::string("CPU (") + kernels::isa_extensions(kernels::active_isa()) + ")";
  info.memory_used_bytes = kv_pool_bytes() + model_->weight_bytes();
  info.num_threads = pool_.num_threads();
  return info;
}

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const Model> model, const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(std::move(model), options);
}

}  // namespace gb
