// CpuBackend: the reference implementation of Backend on the host. It reads the
// memory-mapped weights in place (float or quantized, any type of the weight-type
// table in kernels/cpu/weight_type.h, decoded on the fly inside the matmul kernels;
// types with a CPU layout are repacked once at load, backend/cpu_weights.h)
// and keeps the KV pool in host memory. Matrix products and
// attention heads are split across a ThreadPool owned by the backend.
//
// The forward pass is the model's layer recipe (layer_recipe.h), run through this
// backend's LayerOps: one call per step per layer, the loops inside.
//
// This backend is the oracle: every other path (CUDA, batching, paging, prefix
// reuse, speculative decoding) must reproduce its tokens and logits.
// Private to engine/backend: everyone else includes cpu_backend.h (the factory)
// or runtime/make_backend.h.
// Thread-safety: the engine thread is the only caller.
#pragma once

#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "backend/cpu_weights.h"
#include "backend/kv_arena.h"
#include "backend/layer_recipe.h"
#include "core/thread_pool.h"
#include "cpu/ops.h"
#include "model/model.h"

namespace gb {

// Below this many multiply-adds a dispatch costs more than it saves (a wake-up
// is a few microseconds; 2^18 MACs take ~20 us on one core), so small products
// (stories260K's 64x64 matrices, single-token attention) run on the caller.
constexpr int64_t kMinParallelMacs = int64_t{1} << 18;

// The CPU kernel of each FFN activation (model_config.h's FfnActivation).
inline kernels::GatedActivationFn gated_activation_kernel(FfnActivation a) {
  static constexpr kernels::GatedActivationFn rows[kNumFfnActivations] = {
      &kernels::swiglu, &kernels::gelu_tanh_gated, &kernels::swiglu_oai};
  return rows[static_cast<int>(a)];
}

// v holds at least n elements (a step's scratch grows, never shrinks).
template <class T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// Queries per attention task: the query heads of one KV head's GQA group at
// up to kAttentionQueries / group consecutive positions of one sequence, so
// each K and V row is read once for all of them (CpuBackend::attention; the
// attention mass's tiles follow the same split).
inline constexpr int32_t kAttentionQueries = 32;

class CpuBackend final : public Backend, private LayerOps {
 public:
  CpuBackend(std::shared_ptr<const Model> model, const CpuBackendOptions& options);

  Status init_kv_pool(const KvPoolSpec& spec) override;
  size_t kv_pool_bytes() const override;
  size_t kv_resident_bytes() const override;
  std::vector<WeightType> kv_types() const override;
  bool supports_window_group() const override { return true; }
  bool supports_kv_eviction() const override { return true; }
  Status move_slots(std::span<const std::pair<int32_t, int32_t>> src_dst) override;
  void release_block_memory(std::span<const int32_t> blocks, KvGroup group) override;
  Status forward(const BatchLayout& batch, std::span<float> logits) override;
  Status forward_capture(const BatchLayout& batch, std::span<float> logits, CaptureRows& rows) override;
  Status epilogue_rows(std::span<const float> x, int32_t n, std::span<float> logits) override;
  Status copy_blocks(std::span<const std::pair<int32_t, int32_t>> src_dst, KvGroup group) override;
  Status read_kv_slot(int32_t layer, int32_t block, int32_t slot, std::span<float> k,
                      std::span<float> v) const override;
  DeviceInfo device_info() const override;

 private:
  // Row-parallel y = W x over several matrices that share the input x, in one
  // dispatch (q/k/v, gate/up). outs[i] is (num_tokens, rows of mats[i]).
  void matmul_group(std::initializer_list<std::pair<const TensorView*, float*>> mats, const float* x,
                    int64_t num_tokens) {
    matmul_list(std::span(mats.begin(), mats.size()), x, num_tokens);
  }
  // The same over a list made at run time.
  void matmul_list(std::span<const std::pair<const TensorView*, float*>> mats, const float* x, int64_t num_tokens);
  // Products of several matrices, each over its own rows of one input x
  // (x_rows, cols of every w): job j sets y_j (num_tokens, w rows) = x[first_row
  // .. first_row + num_tokens) w^T. x is converted once, and the jobs' rows are
  // split across threads in one dispatch (a mixture's experts, each over the
  // tokens routed to it).
  struct MatmulJob {
    const TensorView* w = nullptr;
    float* y = nullptr;
    int64_t first_row = 0;
    int64_t num_tokens = 0;
  };
  void matmul_jobs(std::span<const MatmulJob> jobs, const float* x, int64_t x_rows);

  // LayerOps: the recipe's operations over the current step (batch_, logits_).
  Status embed(const RecipeStep& s) override;
  Status scale(const RecipeStep& s) override;
  Status norm(const RecipeStep& s) override;
  Status norm_logit_rows(const RecipeStep& s) override;
  Status project_qkv(const RecipeStep& s) override;
  Status add_bias(const RecipeStep& s) override;
  Status head_norm(const RecipeStep& s) override;
  Status rope(const RecipeStep& s) override;
  Status kv_write(const RecipeStep& s) override;
  Status attention(const RecipeStep& s) override;
  Status project(const RecipeStep& s) override;
  Status project_gate_up(const RecipeStep& s) override;
  Status gated_activation(const RecipeStep& s) override;
  Status residual_add(const RecipeStep& s) override;
  Status softcap(const RecipeStep& s) override;
  Status capture(const RecipeStep& s) override;
  Status moe_ffn(const RecipeStep& s) override;
  // A mixture's routing of the step's rows (k per row) to the batch's routing
  // rows and forward_capture's token, when they want it.
  void record_routing(int32_t layer, int32_t k, const std::vector<int32_t>& chosen, const std::vector<float>& weight);

  // A recipe buffer of the current step: its data, row width and row count.
  float* buf(Buf b);
  int64_t width(Buf b) const;
  int64_t rows(Buf b) const;
  const TensorView& tensor(WeightSlot w, int32_t layer) const;
  // A norm vector as float32 (the converted copies of attn/ffn/output norms).
  const float* norm_weight(WeightSlot w, int32_t layer) const;
  Status validate(const BatchLayout& batch, std::span<float> logits) const;
  Status validate_kv_slots(const BatchLayout& batch) const;

  std::shared_ptr<const Model> model_;
  ModelRecipe recipe_;
  ThreadPool pool_;
  std::shared_ptr<const CpuWeights> cpu_weights_;  // model_'s weights as the kernels read them
  const ModelWeights& weights() const { return cpu_weights_->weights; }
  KvPoolSpec kv_spec_;
  // The pool (kv_arena.h: committed as blocks are first written): every
  // layer's K, then every layer's V, each (blocks of its group, block_size)
  // rows of kv_dim values in kv_spec_.k_type / v_type.
  KvArena kv_arena_;
  size_t k_row_bytes_ = 0, v_row_bytes_ = 0;  // one slot's K (V) row
  std::vector<size_t> k_offset_, v_offset_;    // (layers) byte offsets into kv_arena_
  std::vector<uint8_t> window_layer_;          // (layers) 1: the layer is in the window group
  uint8_t* k_layer(int32_t layer) const { return kv_arena_.data() + k_offset_[static_cast<size_t>(layer)]; }
  uint8_t* v_layer(int32_t layer) const { return kv_arena_.data() + v_offset_[static_cast<size_t>(layer)]; }
  bool in_window_group(int32_t layer) const { return window_layer_[static_cast<size_t>(layer)] != 0; }
  int32_t layer_blocks(int32_t layer) const {
    return in_window_group(layer) ? kv_spec_.num_window_blocks : kv_spec_.num_blocks;
  }
  std::vector<uint8_t> kv_row_scratch_;       // a row being quantized
  std::vector<float> norm_weights_;          // all norm vectors as float32, see norm offsets below
  std::vector<int64_t> attn_norm_offset_;    // (layers) into norm_weights_
  std::vector<int64_t> ffn_norm_offset_;     // (layers)
  int64_t output_norm_offset_ = 0;

  // The step being run (set by forward for the recipe's operations).
  const BatchLayout* batch_ = nullptr;
  float* logits_ = nullptr;
  CaptureRows* capture_ = nullptr;  // forward_capture's rows, else null (Capture steps do nothing)

  // Step activations, grown on demand and reused (num_tokens rows each).
  std::vector<float> x_;       // (num_tokens, dim) residual stream
  std::vector<float> xb_;      // (num_tokens, dim) normed input
  std::vector<float> q_;       // (num_tokens, num_heads * head_dim)
  std::vector<float> k_;       // (num_tokens, kv_dim)
  std::vector<float> v_;       // (num_tokens, kv_dim)
  std::vector<float> att_;     // (num_tokens, num_heads * head_dim)
  std::vector<float> proj_;    // (num_tokens, dim)
  std::vector<float> gate_;    // (num_tokens, hidden_dim), or (num_tokens, 2 hidden_dim) with fused gate/up
  std::vector<float> qkv_;     // (num_tokens, q_dim + 2 kv_dim) with a fused attn_qkv
  std::vector<float> up_;      // (num_tokens, hidden_dim)
  std::vector<float> scores_;  // (num_threads, max context) attention scratch
  // The step's attention mass (BatchLayout::mass), deterministic whatever the
  // batch and the threads: each attention tile holding a query that wants it
  // adds into rows of its own, (num_kv_heads * head parts, the sequence's
  // slots) from mass_tile_offset_[its first token] (-1: none), summed over
  // the layers; forward() then adds them into the batch's sums in a fixed
  // order (sequence, tile, row).
  std::vector<float> mass_partial_;
  std::vector<int64_t> mass_tile_offset_;  // (num_tokens)
  void plan_attention_mass(const BatchLayout& batch);
  void sum_attention_mass(const BatchLayout& batch);
  std::vector<float> final_;   // (num_logits, dim)
  // A mixture-of-experts step (moe_ffn): router logits (num_tokens, experts);
  // each expert's tokens gathered (m, dim), its gate and up (m, expert width),
  // its output (m, dim), and the weighted sum of the experts (num_tokens, dim).
  std::vector<float> router_, expert_in_, expert_gate_, expert_up_, expert_out_, moe_sum_;
  std::vector<kernels::ActBlockQ8> xq_;  // (num_tokens, cols / 32) activations of a quantized matmul
  std::vector<uint16_t> x_bf16_;          // (num_tokens, cols) bf16 activations of a BF16-weight matmul

  // The RoPE angles of the step's tokens, worked out once per step and RoPE
  // variant (a model has one, or two with Gemma 3's sliding-layer base) and
  // reused by every layer's q and k: cos then sin, (num_tokens, rope_dim/2) each.
  struct RopeTable {
    RopeSpec spec;
    std::vector<float> cos, sin;
  };
  std::vector<RopeTable> rope_tables_;  // cleared by forward
  const RopeTable& rope_table(const RopeSpec& spec);
};

}  // namespace gb
