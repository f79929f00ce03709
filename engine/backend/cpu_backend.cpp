#include "backend/cpu_backend_impl.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/decode_tuning.h"
#include "cpu/cpu_info.h"
#include "cpu/kv_type.h"
#include "cpu/matmul.h"
#include "cpu/matmul_quant.h"
#include "cpu/ops.h"
#include "cpu/paged_attention.h"
#include "cpu/weight_type.h"
#include "model/architecture.h"

namespace gb {

namespace {

// Converts one row of a weight tensor (any type in the weight-type table) to float32.
void row_to_f32(const TensorView& t, int64_t r, float* out) {
  kernels::weight_traits(t.dtype).dequantize_row(t.row(r), out, t.cols);
}

// A decode step's matmul is bound by reading its weights, not by its MACs: 128
// KB take a core 3-4 us from memory, about what a dispatch to spinning workers
// costs, so above that the rows are split even when the MACs are few
// (stories15M's 288-wide q/k/v, output and down matrices: 0.3-1 MB each, which
// the MAC rule alone left on one thread while the other waited).
constexpr int64_t kMinParallelWeightBytes = int64_t{128} << 10;

// The RoPE angles of one position: the llama2.c-exact arithmetic for plain
// adjacent pairs (keeps the stories goldens bit-identical), the general one
// otherwise (kernels::rope / rope_ex form the same values).
void rope_angles(const RopeSpec& r, const TensorView& rope_freqs, int32_t pos, float* cos, float* sin) {
  if (r.plain()) {
    kernels::rope_angles(pos, r.base, r.rope_dim, cos, sin);
    return;
  }
  kernels::RopeParams p;
  p.rope_dim = r.rope_dim;
  p.base = r.base;
  p.style = r.style == RopeStyle::NeoX ? kernels::RopeStyle::NeoX : kernels::RopeStyle::Adjacent;
  p.freq_factors = r.freq_factors ? static_cast<const float*>(rope_freqs.data) : nullptr;
  p.freq_scale = r.freq_scale;
  p.attn_factor = r.attn_factor;
  kernels::rope_angles_ex(pos, p, cos, sin);
}

// RMSNorm of n rows of width w with one float32 weight vector; out may be x.
void norm_rows(float* out, const float* x, const float* g, int64_t n, int64_t w, float eps) {
  for (int64_t i = 0; i < n; ++i) kernels::rmsnorm(out + i * w, x + i * w, g, w, eps);
}

}  // namespace

CpuBackend::CpuBackend(std::shared_ptr<const Model> model, const CpuBackendOptions& options)
    : model_(std::move(model)),
      recipe_(model_recipe(model_->config)),
      pool_(options.num_threads),
      cpu_weights_(cpu_weights(model_, {options.repack_weights, options.bf16_matmuls, options.huge_pages}, pool_)) {
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
  if (spec.num_blocks <= 0 || spec.block_size <= 0 || spec.num_window_blocks < 0)
    return make_error("KV pool needs at least one block of at least one token");
  const ModelConfig& c = model_->config;
  if (spec.num_window_blocks > 0 && !c.has_window_group())
    return make_error("KV pool: a window group needs a model whose layers do not all slide (" +
                      describe_sliding_window(c) + ")");
  for (const WeightType t : {spec.k_type, spec.v_type})
    if (const std::string why = kernels::kv_type_unsupported(t, c.kv_dim()); !why.empty())
      return make_error("KV type: " + why);
  const size_t k_row = kernels::kv_row_bytes(spec.k_type, c.kv_dim());
  const size_t v_row = kernels::kv_row_bytes(spec.v_type, c.kv_dim());
  std::vector<uint8_t> window(static_cast<size_t>(c.num_layers), 0);
  std::vector<size_t> k_offset, v_offset;
  size_t bytes = 0;
  for (const auto& [offsets, row] : {std::pair{&k_offset, k_row}, std::pair{&v_offset, v_row}}) {
    for (int32_t l = 0; l < c.num_layers; ++l) {
      window[static_cast<size_t>(l)] = spec.num_window_blocks > 0 && c.is_sliding(l) ? 1 : 0;
      const int32_t blocks = window[static_cast<size_t>(l)] ? spec.num_window_blocks : spec.num_blocks;
      offsets->push_back(bytes);
      bytes += static_cast<size_t>(blocks) * static_cast<size_t>(spec.block_size) * row;
    }
  }
  kv_arena_ = KvArena{};  // the old pool goes before the new one is reserved
  auto arena = KvArena::reserve(bytes, "the KV pool");
  if (!arena) return arena.error();
  kv_arena_ = std::move(*arena);
  kv_spec_ = spec;
  k_row_bytes_ = k_row;
  v_row_bytes_ = v_row;
  k_offset_ = std::move(k_offset);
  v_offset_ = std::move(v_offset);
  window_layer_ = std::move(window);
  kv_row_scratch_.assign(std::max(k_row, v_row), 0);
  return {};
}

size_t CpuBackend::kv_pool_bytes() const { return kv_arena_.size(); }

size_t CpuBackend::kv_resident_bytes() const { return kv_arena_.resident_bytes(); }

void CpuBackend::release_block_memory(std::span<const int32_t> blocks, KvGroup group) {
  const size_t slots = static_cast<size_t>(kv_spec_.block_size);
  const bool window = group == KvGroup::Window;
  for (const int32_t b : blocks) {
    for (int32_t l = 0; l < model_->config.num_layers; ++l) {
      if (in_window_group(l) != window || b < 0 || b >= layer_blocks(l)) continue;
      kv_arena_.release(k_offset_[static_cast<size_t>(l)] + static_cast<size_t>(b) * slots * k_row_bytes_,
                        slots * k_row_bytes_);
      kv_arena_.release(v_offset_[static_cast<size_t>(l)] + static_cast<size_t>(b) * slots * v_row_bytes_,
                        slots * v_row_bytes_);
    }
  }
}

std::vector<WeightType> CpuBackend::kv_types() const {
  std::vector<WeightType> out;
  for (const kernels::KvTypeRow& r : kernels::kv_type_rows()) out.push_back(r.type);
  return out;
}

void CpuBackend::matmul_list(std::span<const std::pair<const TensorView*, float*>> mats, const float* x,
                             int64_t num_tokens) {
  // The recipe's lists are 1 to 3 matrices: on the stack (every layer's matmuls
  // come through here; no allocation on the decode path).
  constexpr size_t kOnStack = 4;
  std::array<MatmulJob, kOnStack> small;
  std::vector<MatmulJob> large;
  if (mats.size() > kOnStack) large.resize(mats.size());
  const std::span<MatmulJob> jobs = mats.size() > kOnStack ? std::span<MatmulJob>(large)
                                                           : std::span<MatmulJob>(small.data(), mats.size());
  for (size_t i = 0; i < mats.size(); ++i) jobs[i] = {mats[i].first, mats[i].second, 0, num_tokens};
  matmul_jobs(jobs, x, num_tokens);
}

void CpuBackend::matmul_jobs(std::span<const MatmulJob> jobs, const float* x, int64_t x_rows) {
  const int64_t cols = jobs.front().w->cols;
  // Quantized weights want 8-bit activations, BF16 weights bf16 ones: convert
  // x once for every job, before the rows are split across threads.
  kernels::MatmulInput in{x, nullptr, nullptr};
  bool wants_q8 = false, wants_bf16 = false;
  for (const MatmulJob& j : jobs) {
    const kernels::ActivationType a = kernels::weight_traits(j.w->dtype).activation;
    wants_q8 |= a == kernels::ActivationType::Q8;
    wants_bf16 |= a == kernels::ActivationType::BF16;
  }
  const auto per_token = [&](auto&& convert) {
    if (x_rows * cols < kMinParallelMacs / 16) convert(0, x_rows, 0);
    else pool_.parallel_for(x_rows, convert);
  };
  if (wants_q8) {
    grow(xq_, static_cast<size_t>(x_rows * cols / kernels::kActBlock));
    per_token([&](int64_t begin, int64_t end, int) { kernels::quantize_activations(x, cols, begin, end, xq_.data()); });
    in.q8 = xq_.data();
  }
  if (wants_bf16) {
    grow(x_bf16_, static_cast<size_t>(x_rows * cols));
    per_token([&](int64_t begin, int64_t end, int) { kernels::round_activations_bf16(x, cols, begin, end, x_bf16_.data()); });
    in.bf16 = x_bf16_.data();
  }
  // Job j's input: its rows of each converted form.
  const auto input_of = [&](const MatmulJob& j) {
    kernels::MatmulInput ji = in;
    ji.f32 = in.f32 + j.first_row * cols;
    if (ji.q8 != nullptr) ji.q8 = in.q8 + j.first_row * cols / kernels::kActBlock;
    if (ji.bf16 != nullptr) ji.bf16 = in.bf16 + j.first_row * cols;
    return ji;
  };
  // Concatenate the row ranges of all jobs and split the total across threads
  // in multiples of 4 rows (the float kernel's tile height).
  int64_t total = 0, weight_bytes = 0, macs = 0;
  for (const MatmulJob& j : jobs) {
    total += j.w->rows;
    weight_bytes += static_cast<int64_t>(j.w->num_bytes());
    macs += j.w->rows * cols * j.num_tokens;
  }
  const auto run = [&](int64_t begin, int64_t end, int) {
    int64_t base = 0;
    for (const MatmulJob& j : jobs) {
      const int64_t lo = std::max(begin, base), hi = std::min(end, base + j.w->rows);
      if (lo < hi)
        kernels::matmul_weights(j.y, j.w->rows, input_of(j), j.w->data, static_cast<int64_t>(j.w->row_bytes()),
                                kernels::weight_traits(j.w->dtype), j.num_tokens, j.w->cols, lo - base, hi - base);
      base += j.w->rows;
    }
  };
  if (macs < kMinParallelMacs && weight_bytes < kMinParallelWeightBytes) {
    run(0, total, 0);
    return;
  }
  const bool same_tokens = std::all_of(jobs.begin(), jobs.end(),
                                       [&](const MatmulJob& j) { return j.num_tokens == jobs.front().num_tokens; });
  if (same_tokens || pool_.num_threads() == 1) {
    pool_.parallel_for(total, run, 4);
    return;
  }
  // Jobs over different numbers of rows of x (a mixture's experts, each over
  // the tokens routed to it): a row's cost is its job's token count, so split
  // the rows where the threads' shares of rows x tokens are equal (multiples
  // of 4 rows), not by rows alone (one thread would get the busy experts).
  const int threads = pool_.num_threads();
  const int64_t work = macs / cols;  // rows x tokens over every job
  std::vector<int64_t> bound(static_cast<size_t>(threads) + 1, total);
  bound[0] = 0;
  int t = 1;
  int64_t base = 0, done = 0;
  for (const MatmulJob& j : jobs) {
    const int64_t per_row = std::max<int64_t>(1, j.num_tokens), job_work = j.w->rows * per_row;
    for (; t < threads && work * t / threads < done + job_work; ++t) {
      const int64_t row = base + (work * t / threads - done) / per_row;
      bound[static_cast<size_t>(t)] = std::clamp<int64_t>(row / 4 * 4, bound[static_cast<size_t>(t) - 1], total);
    }
    base += j.w->rows;
    done += job_work;
  }
  pool_.parallel_for(threads, [&](int64_t begin, int64_t end, int worker) {
    for (auto i = static_cast<size_t>(begin); i < static_cast<size_t>(end); ++i)
      if (bound[i] < bound[i + 1]) run(bound[i], bound[i + 1], worker);
  });
}

namespace {
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

Status CpuBackend::attention(const RecipeStep& step) {
  const BatchLayout& batch = *batch_;
  const int32_t layer = step.layer;
  const AttentionSpec& shape = step.attention;
  const ModelConfig& c = model_->config;
  const int32_t q_dim = c.num_heads * c.head_dim;
  const int32_t group = c.num_heads / c.num_kv_heads;
  // Main-table layers read slots (positions, unless KV eviction moved them);
  // window-group layers read positions, at most their window.
  const bool window_table = in_window_group(layer);
  int32_t max_ctx = 0;
  for (int32_t s = 0; s < batch.num_seqs(); ++s)
    max_ctx = std::max(max_ctx, window_table ? batch.seq_kv_len[static_cast<size_t>(s)] : batch.kv_slots_of(s));
  if (window_table && shape.window > 0) max_ctx = std::min(max_ctx, shape.window);
  const bool slotted = !window_table && batch.has_kv_slots();
  const bool want_mass = !window_table && batch.mass != nullptr && !batch.mass_from.empty();
  const int32_t positions_per_tile = std::max(1, kAttentionQueries / group);
  const int32_t queries_per_task = std::min(group, kAttentionQueries) * positions_per_tile;
  grow(scores_, static_cast<size_t>(pool_.num_threads()) * static_cast<size_t>(queries_per_task) *
                    static_cast<size_t>(max_ctx));
  const std::vector<AttentionTile> tiles = attention_tiles(batch, positions_per_tile);
  // Heads of a group beyond kAttentionQueries (group > 32) go in several tasks.
  const int32_t head_parts = (group + kAttentionQueries - 1) / kAttentionQueries;
  const int64_t tasks_per_tile = static_cast<int64_t>(c.num_kv_heads) * head_parts;
  const int64_t num_tasks = static_cast<int64_t>(tiles.size()) * tasks_per_tile;
  // gpt-oss: each query head's sink logit (F32 from the loader).
  const float* sinks = shape.sinks ? static_cast<const float*>(weights().layers[static_cast<size_t>(layer)].sinks.data) : nullptr;
  constexpr float no_sink = -std::numeric_limits<float>::infinity();
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
      kv.k_cache = k_layer(layer);
      kv.v_cache = v_layer(layer);
      kv.k_type = kv_spec_.k_type;
      kv.v_type = kv_spec_.v_type;
      kv.block_table = batch.table(tile.seq, window_table);
      kv.block_size = batch.block_size;
      kv.num_kv_heads = c.num_kv_heads;
      kv.head_dim = c.head_dim;
      const auto su = static_cast<size_t>(tile.seq);
      const int64_t mass_at = want_mass ? mass_tile_offset_[static_cast<size_t>(tile.begin)] : -1;
      float* mass = mass_at < 0 ? nullptr
                                : mass_partial_.data() + mass_at +
                                      int64_t{kv_head * head_parts + part} * batch.kv_slots_of(tile.seq);
      int32_t m = 0;
      for (int32_t i = tile.begin; i < tile.end; ++i) {
        const int32_t pos = batch.positions[static_cast<size_t>(i)];
        const int32_t first = shape.window > 0 ? std::max(0, pos - shape.window + 1) : 0;
        const int32_t num_ctx = slotted ? batch.kv_visible[static_cast<size_t>(i)] : pos + 1;
        float* weight_sum = mass != nullptr && pos >= batch.mass_from[su] ? mass : nullptr;
        for (int32_t h = h_begin; h < h_end; ++h) {
          const size_t qo = static_cast<size_t>(i) * q_dim + static_cast<size_t>(h) * c.head_dim;
          queries[m++] = {q_.data() + qo, att_.data() + qo, first, num_ctx, sinks != nullptr ? sinks[h] : no_sink,
                          weight_sum};
        }
      }
      kernels::paged_attention_group(queries, m, kv, kv_head, shape.scale, shape.softcap, scores, max_ctx);
    }
  };
  const int64_t macs = static_cast<int64_t>(batch.num_tokens()) * c.num_heads * max_ctx * c.head_dim * 2;
  // K and V rows read at most (decode reads each once; the same bytes rule as the matmuls).
  const int64_t kv_bytes = static_cast<int64_t>(batch.num_seqs()) * max_ctx * static_cast<int64_t>(k_row_bytes_ + v_row_bytes_);
  if (macs < kMinParallelMacs && kv_bytes < kMinParallelWeightBytes) run(0, num_tasks, 0);
  else pool_.parallel_for(num_tasks, run);
  return {};
}

namespace {
// Every block a query of `batch` reads or a new token is written to is present
// in `table(s)`: positions first_new - window + 1 .. kv_len - 1 of each
// sequence (all of them when window is 0, i.e. some layer reads the whole
// context). Every id is -1 (released) or inside a pool of num_blocks.
template <typename TableOf>
Status check_table_slots(const BatchLayout& batch, int32_t window, int32_t num_blocks, const char* what,
                         TableOf table_of, bool slotted, bool window_table) {
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    const auto su = static_cast<size_t>(s);
    const int32_t kv_len = slotted ? batch.kv_slots_of(s) : batch.seq_kv_len[su];
    const int32_t* table = table_of(s);
    const std::vector<int32_t>& indptr = slotted || !window_table ? batch.block_indptr : batch.window_block_indptr;
    const int32_t n = indptr[su + 1] - indptr[su];
    for (int32_t blk = 0; blk < n; ++blk)
      if (table[blk] < -1 || table[blk] >= num_blocks)
        return make_error(std::string(what) + " of sequence " + std::to_string(s) + " names block " +
                          std::to_string(table[blk]) + ", outside a pool of " + std::to_string(num_blocks));
    if (kv_len > n * batch.block_size)
      return make_error("sequence " + std::to_string(s) + " reaches slot " + std::to_string(kv_len - 1) + " but its " +
                        what + " has " + std::to_string(n) + " blocks");
    if (kv_len <= 0 || batch.seq_token_indptr[su] == batch.seq_token_indptr[su + 1]) continue;
    const int32_t first_new = slotted ? 0 : batch.positions[static_cast<size_t>(batch.seq_token_indptr[su])];
    const int32_t first_read = window > 0 ? std::max(0, first_new - window + 1) : 0;
    for (int32_t blk = first_read / batch.block_size; blk <= (kv_len - 1) / batch.block_size; ++blk)
      if (table[blk] < 0)
        return make_error("sequence " + std::to_string(s) + ": block " + std::to_string(blk) + " of its " + what +
                          " was released by the sliding window but position " +
                          std::to_string(std::max(first_read, blk * batch.block_size)) + " is still read");
  }
  return {};
}
}  // namespace

Status CpuBackend::validate(const BatchLayout& batch, std::span<float> logits) const {
  const ModelConfig& c = model_->config;
  if (kv_arena_.data() == nullptr) return make_error("forward called before the KV pool was initialised");
  if (batch.block_size != kv_spec_.block_size)
    return make_error("batch block size " + std::to_string(batch.block_size) + " differs from the KV pool's " +
                      std::to_string(kv_spec_.block_size));
  for (TokenId t : batch.token_ids)
    if (t < 0 || t >= c.vocab_size)
      return make_error("token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                        std::to_string(c.vocab_size - 1) + ")");
  if ((kv_spec_.num_window_blocks > 0) != batch.has_window_tables())
    return make_error(kv_spec_.num_window_blocks > 0
                          ? "the KV pool keeps the sliding layers apart (a window group): the batch needs their tables"
                          : "the batch has window-group tables but the KV pool has no window group");
  // -1 marks a block the sliding window released (kv/block_table.h): allowed
  // only where no query of this batch reads.
  const bool slotted = batch.has_kv_slots();
  if (slotted) GB_TRY(validate_kv_slots(batch));
  GB_TRY(check_table_slots(batch, c.kv_release_window(), kv_spec_.num_blocks, "block table",
                           [&](int32_t s) { return batch.table(s, false); }, slotted, false));
  if (batch.has_window_tables())
    GB_TRY(check_table_slots(batch, c.sliding_window, kv_spec_.num_window_blocks, "window-group table",
                             [&](int32_t s) { return batch.table(s, true); }, false, true));
  GB_CHECK(logits.size() >= static_cast<size_t>(batch.num_logits()) * static_cast<size_t>(c.vocab_size));
  GB_CHECK(batch.num_layers <= c.num_layers);
  return {};
}

float* CpuBackend::buf(Buf b) {
  switch (b) {
    case Buf::X: return x_.data();
    case Buf::XB: return xb_.data();
    case Buf::Q: return q_.data();
    case Buf::K: return k_.data();
    case Buf::V: return v_.data();
    case Buf::Att: return att_.data();
    case Buf::Proj: return proj_.data();
    // The gated activation writes in place over the gate (split) or into up_ (fused).
    case Buf::Hidden: return model_->config.fused_gate_up ? up_.data() : gate_.data();
    case Buf::Final: return final_.data();
    case Buf::Logits: return logits_;
    case Buf::None: break;
  }
  GB_CHECK_MSG(false, "recipe step names no buffer");
  return nullptr;
}

int64_t CpuBackend::width(Buf b) const {
  const ModelConfig& c = model_->config;
  switch (b) {
    case Buf::Q: case Buf::Att: return int64_t{c.num_heads} * c.head_dim;
    case Buf::K: case Buf::V: return c.kv_dim();
    case Buf::Hidden: return c.hidden_dim;
    case Buf::Logits: return c.vocab_size;
    default: return c.dim;
  }
}

int64_t CpuBackend::rows(Buf b) const {
  return b == Buf::Final || b == Buf::Logits ? batch_->num_logits() : batch_->num_tokens();
}

const TensorView& CpuBackend::tensor(WeightSlot w, int32_t layer) const {
  const ModelWeights& mw = weights();
  if (w == WeightSlot::TokenEmbedding) return mw.token_embedding;
  if (w == WeightSlot::OutputNorm) return mw.output_norm;
  if (w == WeightSlot::Classifier) return mw.classifier;
  const LayerWeights& l = mw.layers[static_cast<size_t>(layer)];
  switch (w) {
    case WeightSlot::AttnNorm: return l.attn_norm;
    case WeightSlot::Wq: return l.wq;
    case WeightSlot::Wk: return l.wk;
    case WeightSlot::Wv: return l.wv;
    case WeightSlot::Wqkv: return l.wqkv;
    case WeightSlot::Bq: return l.bq;
    case WeightSlot::Bk: return l.bk;
    case WeightSlot::Bv: return l.bv;
    case WeightSlot::QNorm: return l.q_norm;
    case WeightSlot::KNorm: return l.k_norm;
    case WeightSlot::Wo: return l.wo;
    case WeightSlot::PostAttnNorm: return l.post_attn_norm;
    case WeightSlot::FfnNorm: return l.ffn_norm;
    case WeightSlot::WGate: return l.w_gate;
    case WeightSlot::WUp: return l.w_up;
    case WeightSlot::WDown: return l.w_down;
    case WeightSlot::PostFfnNorm: return l.post_ffn_norm;
    case WeightSlot::Router: return l.router;
    case WeightSlot::Bo: return l.bo;
    default: break;
  }
  GB_CHECK_MSG(false, "recipe step names no weight");
  return mw.output_norm;
}

const float* CpuBackend::norm_weight(WeightSlot w, int32_t layer) const {
  if (w == WeightSlot::AttnNorm) return norm_weights_.data() + attn_norm_offset_[static_cast<size_t>(layer)];
  if (w == WeightSlot::FfnNorm) return norm_weights_.data() + ffn_norm_offset_[static_cast<size_t>(layer)];
  if (w == WeightSlot::OutputNorm) return norm_weights_.data() + output_norm_offset_;
  return static_cast<const float*>(tensor(w, layer).data);  // the loader hands vectors out as F32; null if absent
}

Status CpuBackend::embed(const RecipeStep& s) {
  const TensorView& table = tensor(s.weight, s.layer);
  const int64_t dim = model_->config.dim;
  for (int64_t i = 0; i < batch_->num_tokens(); ++i)
    row_to_f32(table, batch_->token_ids[static_cast<size_t>(i)], buf(s.out) + i * dim);
  return {};
}

Status CpuBackend::scale(const RecipeStep& s) {
  float* x = buf(s.out);
  const int64_t n = rows(s.out) * width(s.out);
  for (int64_t i = 0; i < n; ++i) x[i] *= s.value;
  return {};
}

// An optional vector (post norm, q/k norm, bias) that is absent makes its step
// the identity: the loader requires them, so only a model edited in memory to
// switch a feature off (an ablation) has a gap.
Status CpuBackend::norm(const RecipeStep& s) {
  const float* g = norm_weight(s.weight, s.layer);
  if (g == nullptr) return {};
  norm_rows(buf(s.out), buf(s.in), g, rows(s.out), width(s.out), s.value);
  return {};
}

Status CpuBackend::norm_logit_rows(const RecipeStep& s) {
  const int64_t dim = model_->config.dim;
  const float* g = norm_weight(s.weight, s.layer);
  for (int64_t j = 0; j < batch_->num_logits(); ++j) {
    const int64_t i = batch_->logit_token_indices[static_cast<size_t>(j)];
    kernels::rmsnorm(buf(s.out) + j * dim, buf(s.in) + i * dim, g, dim, s.value);
  }
  return {};
}

// q, k, v of every token: three matrices in one dispatch, or one fused matrix
// (Phi-3) whose rows are q, then k, then v, copied apart.
Status CpuBackend::project_qkv(const RecipeStep& s) {
  const ModelConfig& c = model_->config;
  const LayerWeights& lw = weights().layers[static_cast<size_t>(s.layer)];
  const int64_t n = batch_->num_tokens(), kv_dim = c.kv_dim(), q_dim = int64_t{c.num_heads} * c.head_dim;
  if (!s.fused) {
    matmul_group({{&lw.wq, q_.data()}, {&lw.wk, k_.data()}, {&lw.wv, v_.data()}}, buf(s.in), n);
    return {};
  }
  const int64_t w = q_dim + 2 * kv_dim;
  grow(qkv_, static_cast<size_t>(n * w));
  matmul_group({{&tensor(s.weight, s.layer), qkv_.data()}}, buf(s.in), n);
  for (int64_t i = 0; i < n; ++i) {
    const float* row = qkv_.data() + i * w;
    std::memcpy(q_.data() + i * q_dim, row, static_cast<size_t>(q_dim) * sizeof(float));
    std::memcpy(k_.data() + i * kv_dim, row + q_dim, static_cast<size_t>(kv_dim) * sizeof(float));
    std::memcpy(v_.data() + i * kv_dim, row + q_dim + kv_dim, static_cast<size_t>(kv_dim) * sizeof(float));
  }
  return {};
}

Status CpuBackend::add_bias(const RecipeStep& s) {
  const auto* b = static_cast<const float*>(tensor(s.weight, s.layer).data);  // F32 from the loader
  if (b == nullptr) return {};
  const int64_t w = width(s.out);
  for (int64_t i = 0; i < rows(s.out); ++i) kernels::add_inplace(buf(s.out) + i * w, b, w);
  return {};
}

Status CpuBackend::head_norm(const RecipeStep& s) {
  const float* g = norm_weight(s.weight, s.layer);
  if (g == nullptr) return {};
  norm_rows(buf(s.out), buf(s.out), g, rows(s.out) * s.heads, model_->config.head_dim, s.value);
  return {};
}

const CpuBackend::RopeTable& CpuBackend::rope_table(const RopeSpec& spec) {
  for (const RopeTable& t : rope_tables_)
    if (t.spec == spec) return t;
  RopeTable t;
  t.spec = spec;
  const int64_t n = batch_->num_tokens(), half = spec.rope_dim / 2;
  t.cos.resize(static_cast<size_t>(n * half));
  t.sin.resize(static_cast<size_t>(n * half));
  for (int64_t i = 0; i < n; ++i)
    rope_angles(spec, weights().rope_freqs, batch_->positions[static_cast<size_t>(i)], t.cos.data() + i * half,
                t.sin.data() + i * half);
  rope_tables_.push_back(std::move(t));
  return rope_tables_.back();
}

Status CpuBackend::rope(const RecipeStep& s) {
  const int32_t head_dim = model_->config.head_dim;
  const int64_t w = width(s.out), half = s.rope.rope_dim / 2;
  const RopeTable& t = rope_table(s.rope);
  const auto style = s.rope.style == RopeStyle::NeoX ? kernels::RopeStyle::NeoX : kernels::RopeStyle::Adjacent;
  for (int64_t i = 0; i < batch_->num_tokens(); ++i)
    kernels::rope_rotate(buf(s.out) + i * w, s.heads, head_dim, s.rope.rope_dim, style, t.cos.data() + i * half,
                         t.sin.data() + i * half);
  return {};
}

// K and V of every token into the slots its sequence's block table names,
// converted once to the pool's KV types (the weight-type table's quantize_row).
Status CpuBackend::kv_write(const RecipeStep& s) {
  const BatchLayout& batch = *batch_;
  if (!batch.write_kv) return {};
  const int64_t kv_dim = model_->config.kv_dim();
  uint8_t* kc = k_layer(s.layer);
  uint8_t* vc = v_layer(s.layer);
  const kernels::WeightTypeTraits& kt = kernels::weight_traits(kv_spec_.k_type);
  const kernels::WeightTypeTraits& vt = kernels::weight_traits(kv_spec_.v_type);
  const bool window_table = in_window_group(s.layer);
  for (int32_t q = 0; q < batch.num_seqs(); ++q) {
    const int32_t* table = batch.table(q, window_table);
    for (int32_t i = batch.seq_token_indptr[static_cast<size_t>(q)]; i < batch.seq_token_indptr[static_cast<size_t>(q) + 1]; ++i) {
      // Main-table layers of an evicting batch write the token's slot.
      const int32_t pos = !window_table && batch.has_kv_slots() ? batch.kv_slots[static_cast<size_t>(i)]
                                                                 : batch.positions[static_cast<size_t>(i)];
      const auto slot = static_cast<size_t>(int64_t{table[pos / batch.block_size]} * batch.block_size + pos % batch.block_size);
      kt.quantize_row(k_.data() + i * kv_dim, kc + slot * k_row_bytes_, kv_dim);
      vt.quantize_row(v_.data() + i * kv_dim, vc + slot * v_row_bytes_, kv_dim);
    }
  }
  return {};
}

// out = in W^T; with `accumulate`, into proj_ and then added (the residual).
Status CpuBackend::project(const RecipeStep& s) {
  const TensorView& w = tensor(s.weight, s.layer);
  const int64_t n = rows(s.out);
  if (!s.accumulate) {
    matmul_group({{&w, buf(s.out)}}, buf(s.in), n);
    return {};
  }
  matmul_group({{&w, proj_.data()}}, buf(s.in), n);
  kernels::add_inplace(buf(s.out), proj_.data(), n * width(s.out));
  return {};
}

// gate_ holds (n, hidden) and up_ (n, hidden); fused (Phi-3): gate_ holds
// (n, 2 hidden), each row's gate half then its up half.
Status CpuBackend::project_gate_up(const RecipeStep& s) {
  const LayerWeights& lw = weights().layers[static_cast<size_t>(s.layer)];
  const int64_t n = batch_->num_tokens();
  if (s.fused) matmul_group({{&tensor(s.weight, s.layer), gate_.data()}}, buf(s.in), n);
  else matmul_group({{&lw.w_gate, gate_.data()}, {&lw.w_up, up_.data()}}, buf(s.in), n);
  return {};
}

// Row by row, so each token's activations take the same SIMD/tail path
// whatever else is in the batch (batched = alone, bit for bit).
Status CpuBackend::gated_activation(const RecipeStep& s) {
  const int64_t hidden = model_->config.hidden_dim;
  const bool fused = model_->config.fused_gate_up;
  float* out = buf(s.out);
  for (int64_t i = 0; i < batch_->num_tokens(); ++i) {
    const float* gate = fused ? gate_.data() + i * 2 * hidden : gate_.data() + i * hidden;
    const float* up = fused ? gate + hidden : up_.data() + i * hidden;
    gated_activation_kernel(s.activation)(out + i * hidden, gate, up, hidden);
  }
  return {};
}

Status CpuBackend::residual_add(const RecipeStep& s) {
  kernels::add_inplace(buf(s.out), buf(s.in), rows(s.out) * width(s.out));
  return {};
}

Status CpuBackend::softcap(const RecipeStep& s) {
  kernels::softcap_inplace(buf(s.out), rows(s.out) * width(s.out), s.value);
  return {};
}

// One row of the step's buffer into the capture (forward_capture only).
Status CpuBackend::capture(const RecipeStep& s) {
  if (capture_ == nullptr) return {};
  const int64_t w = width(s.in);
  const float* src = buf(s.in) + int64_t{capture_->token} * w;
  std::copy(src, src + w, capture_->row(s.capture, s.layer, w));
  return {};
}

Status CpuBackend::forward_capture(const BatchLayout& batch, std::span<float> logits, CaptureRows& rows) {
  const ModelConfig& c = model_->config;
  if (rows.token < 0 || rows.token >= batch.num_tokens())
    return make_error("capture of token " + std::to_string(rows.token) + " of a step with " +
                      std::to_string(batch.num_tokens()) + " tokens");
  rows.reset(c.num_layers, c.dim, c.num_heads * c.head_dim, c.num_experts_used);
  capture_ = &rows;
  Status st = forward(batch, logits);
  capture_ = nullptr;
  return st;
}

// The epilogue over given rows: they become the X rows of a step of n tokens
// whose logit rows are all of them, so the same steps (and kernels) as a
// forward's last ones run.
Status CpuBackend::epilogue_rows(std::span<const float> x, int32_t n, std::span<float> logits) {
  const ModelConfig& c = model_->config;
  if (n <= 0) return {};
  GB_CHECK(x.size() >= static_cast<size_t>(n) * static_cast<size_t>(c.dim));
  GB_CHECK(logits.size() >= static_cast<size_t>(n) * static_cast<size_t>(c.vocab_size));
  BatchLayout rows;
  rows.token_ids.assign(static_cast<size_t>(n), 0);
  rows.positions.assign(static_cast<size_t>(n), 0);
  for (int32_t i = 0; i < n; ++i) rows.logit_token_indices.push_back(i);
  grow(x_, int64_t{n} * c.dim);
  grow(proj_, int64_t{n} * c.dim);
  grow(final_, int64_t{n} * c.dim);
  std::copy(x.begin(), x.begin() + int64_t{n} * c.dim, x_.begin());
  batch_ = &rows;
  logits_ = logits.data();
  Status st = run_steps(recipe_.epilogue, *this);
  batch_ = nullptr;
  logits_ = nullptr;
  return st;
}

Status CpuBackend::forward(const BatchLayout& batch, std::span<float> logits) {
  GB_TRY(validate(batch, logits));
  const ModelConfig& c = model_->config;
  const int64_t n = batch.num_tokens();
  if (n == 0) return {};
  const int64_t dim = c.dim, kv_dim = c.kv_dim(), q_dim = int64_t{c.num_heads} * c.head_dim, hidden = c.hidden_dim;
  const int64_t gate_width = c.fused_gate_up ? 2 * hidden : hidden;
  grow(x_, n * dim); grow(xb_, n * dim); grow(q_, n * q_dim); grow(k_, n * kv_dim); grow(v_, n * kv_dim);
  grow(att_, n * q_dim); grow(proj_, n * dim); grow(gate_, n * gate_width); grow(up_, n * hidden);
  grow(final_, std::max<int64_t>(batch.num_logits(), 1) * dim);
  batch_ = &batch;
  logits_ = logits.data();
  rope_tables_.clear();
  if (batch.routing != nullptr) {  // a mixture's routing of the logit rows (moe_ffn fills it)
    RoutingRows& r = *batch.routing;
    r.layers = c.num_layers;
    r.experts_per_token = c.num_experts_used;
    const auto size = static_cast<size_t>(batch.num_logits()) * static_cast<size_t>(c.num_layers) *
                      static_cast<size_t>(c.num_experts_used);
    r.experts.assign(size, -1);
    r.weights.assign(size, 0.0f);
  }
  const bool want_mass = batch.mass != nullptr && !batch.mass_from.empty();
  if (want_mass) plan_attention_mass(batch);
  Status status = run_steps(recipe_.prologue, *this);
  const int32_t num_layers = batch.num_layers < 0 ? c.num_layers : batch.num_layers;
  for (int32_t l = 0; l < num_layers && status.ok(); ++l) status = run_steps(recipe_.layers[static_cast<size_t>(l)], *this);
  if (status.ok() && batch.num_logits() > 0) status = run_steps(recipe_.epilogue, *this);
  if (want_mass) sum_attention_mass(batch);
  batch_ = nullptr;
  logits_ = nullptr;
  return status;
}

Status CpuBackend::copy_blocks(std::span<const std::pair<int32_t, int32_t>> src_dst, KvGroup group) {
  const size_t block_slots = static_cast<size_t>(kv_spec_.block_size);
  const bool window = group == KvGroup::Window;
  const int32_t num_blocks = window ? kv_spec_.num_window_blocks : kv_spec_.num_blocks;
  for (const auto& [src, dst] : src_dst) {
    if (src < 0 || src >= num_blocks || dst < 0 || dst >= num_blocks)
      return make_error("copy_blocks: block " + std::to_string(src < 0 || src >= num_blocks ? src : dst) +
                        " is outside the " + (window ? "window group's" : "KV") + " pool of " +
                        std::to_string(num_blocks));
    for (int32_t l = 0; l < model_->config.num_layers; ++l) {
      if (in_window_group(l) != window) continue;
      for (const auto& [base, row] : {std::pair{k_layer(l), k_row_bytes_}, std::pair{v_layer(l), v_row_bytes_}}) {
        const size_t block_bytes = block_slots * row;
        std::memcpy(base + static_cast<size_t>(dst) * block_bytes, base + static_cast<size_t>(src) * block_bytes,
                    block_bytes);
      }
    }
  }
  return {};
}

Status CpuBackend::read_kv_slot(int32_t layer, int32_t block, int32_t slot, std::span<float> k,
                                std::span<float> v) const {
  const auto kv_dim = static_cast<size_t>(model_->config.kv_dim());
  if (layer < 0 || layer >= model_->config.num_layers || kv_arena_.data() == nullptr || block < 0 ||
      block >= layer_blocks(layer) || slot < 0 || slot >= kv_spec_.block_size || k.size() < kv_dim ||
      v.size() < kv_dim)
    return make_error("read_kv_slot: layer/block/slot out of range");
  const size_t s = static_cast<size_t>(block) * static_cast<size_t>(kv_spec_.block_size) + static_cast<size_t>(slot);
  kernels::weight_traits(kv_spec_.k_type).dequantize_row(k_layer(layer) + s * k_row_bytes_, k.data(),
                                                         static_cast<int64_t>(kv_dim));
  kernels::weight_traits(kv_spec_.v_type).dequantize_row(v_layer(layer) + s * v_row_bytes_, v.data(),
                                                         static_cast<int64_t>(kv_dim));
  return {};
}

DeviceInfo CpuBackend::device_info() const {
  DeviceInfo info;
  info.backend = "cpu";
  info.name = std::string("CPU (") + kernels::isa_extensions(kernels::active_isa()) + ")";
  // The file's weights less the pages handed back for matrices held in another
  // layout or type, plus those copies (backend/cpu_weights.h).
  info.memory_used_bytes = kv_pool_bytes() + model_->weight_bytes() - cpu_weights_->released_bytes +
                           cpu_weights_->owned_bytes;
  info.memory_taken_bytes = cpu_weights_->owned_bytes;
  info.num_threads = pool_.num_threads();
  info.weight_bytes_per_token = weight_bytes_per_token(weights());
  info.bf16_matmuls = cpu_weights_->bf16_tensors > 0;
  info.weights_in_huge_pages = cpu_weights_->huge_pages;
  for (const DecodePrefetchChoice& c : cpu_weights_->decode_prefetch) {
    DecodePrefetchReport& r = info.decode_prefetch.emplace_back();
    r.type = kernels::weight_traits(c.type).name;
    r.bytes = c.bytes;
    r.source = prefetch_source_name(c.source);
    for (const PrefetchTrial& t : c.trials) r.trials.emplace_back(t.bytes, t.gb_per_s);
  }
  return info;
}

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const Model> model, const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(std::move(model), options);
}

}  // namespace gb
