// Backend: the one interface through which the engine runs a model. A backend
// owns the weights in its memory (device or host), the KV pool storage, and the
// kernels. The engine thread is its only caller.
//
// KV pool storage layout (every backend, so copies and views agree):
//   for each layer l: K[l] (num_blocks, block_size, num_kv_heads, head_dim) values of k_type
//                     V[l] (num_blocks, block_size, num_kv_heads, head_dim) values of v_type
// The KV types (kernels/cpu/kv_type.h: F32, F16, BF16, Q8_0, Q4_0, Q4_1,
// IQ4_NL) store each slot's row of kv_dim values as that type's blocks; a
// token's K and V are converted once, when they are written.
// Which block belongs to whom is the engine's BlockPool's business, not the backend's.
//
// Window group (KvPoolSpec::num_window_blocks > 0, a model whose layers do not
// all slide, e.g. Gemma 3): the sliding layers (ModelConfig::is_sliding) keep
// their K/V in a pool of their own of num_window_blocks blocks, addressed by
// the batch's window tables (BatchLayout::window_block_ids); the other layers
// use num_blocks and block_ids. Block ids of the two pools are unrelated.
//
// This header is the interface only. A backend for a model comes from
// runtime/make_backend.h (the device policy); the concrete factories are
// backend/cpu_backend.h and backend/cuda/cuda_backend.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include <vector>

#include "backend/batch_layout.h"
#include "backend/layer_recipe.h"
#include "core/result.h"
#include "model/dtype.h"

namespace gb {

struct KvPoolSpec {
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  WeightType k_type = WeightType::F32;  // a KV type (kernels/cpu/kv_type.h)
  WeightType v_type = WeightType::F32;
  int32_t num_window_blocks = 0;  // the window group's pool (see above); 0: none
};

// Which of a pool's layer groups a block id belongs to (see above).
enum class KvGroup : int32_t { Main = 0, Window = 1 };

// How far ahead a decode step asks for the weights of one type (the CPU
// backend; backend/decode_tuning.h): "F16", 16384, and where the distance
// came from ("default", "environment", "cached" or "measured").
struct DecodePrefetchReport {
  std::string type;
  int64_t bytes = 0;
  std::string source;
  // When measured: each candidate distance and its median read rate (GB/s).
  std::vector<std::pair<int64_t, double>> trials;
};

struct DeviceInfo {
  std::string backend;     // "cpu" or "cuda"
  std::string name;        // processor or GPU name
  size_t memory_used_bytes = 0;   // weights + KV pool + workspace held by this backend
  // Of memory_used_bytes, host memory already taken when this is read: the CPU
  // backend's own copies of weights (anonymous, written at load), which the
  // host's available memory (MemAvailable) no longer counts; file pages it
  // reads in place are not (the kernel counts them as reclaimable).
  size_t memory_taken_bytes = 0;
  size_t memory_total_bytes = 0;  // device memory (0 when not meaningful)
  size_t memory_free_bytes = 0;   // device memory free now, after what this backend holds (0: not known)
  int32_t num_threads = 0;
  // Bytes of weights one decode step reads as this backend holds them (0: as
  // the model file holds them), and whether float matrices run as bf16 dot
  // products (CpuBackendOptions::bf16_matmuls).
  size_t weight_bytes_per_token = 0;
  bool bf16_matmuls = false;
  // The weights a step reads were placed in memory advised into transparent
  // huge pages (CpuBackendOptions::huge_pages), not read from 4 KB file pages.
  bool weights_in_huge_pages = false;
  std::vector<DecodePrefetchReport> decode_prefetch;  // one per weight type a decode step reads with a distance
};

// What Backend::forward_capture records for one token of its step: the rows
// the recipe's Capture steps hand over (layer_recipe.h, docs/inside.md), each
// (num_layers, width) row-major, layer l at l x width; width is dim for the
// residuals and num_heads x head_dim for the query. Layers the step does not
// run (BatchLayout::num_layers) stay zero.
struct CaptureRows {
  int32_t token = 0;  // index into the batch's tokens
  std::vector<float> layer_input, query, after_attention, layer_output;
  // A mixture of experts: the token's experts in each layer, best first, and
  // their renormalized weights ((layers, experts_per_token) each; empty for a
  // dense model). Written by the backend's MoeFfn step.
  int32_t experts_per_token = 0;
  std::vector<int32_t> experts;
  std::vector<float> expert_weights;

  // Every row set sized for a model, zeroed (forward_capture, before the step).
  void reset(int32_t num_layers, int32_t dim, int32_t q_dim, int32_t experts_used = 0) {
    const auto layers = static_cast<size_t>(num_layers);
    for (std::vector<float>* rows : {&layer_input, &after_attention, &layer_output})
      rows->assign(layers * static_cast<size_t>(dim), 0.0f);
    query.assign(layers * static_cast<size_t>(q_dim), 0.0f);
    experts_per_token = experts_used;
    experts.assign(layers * static_cast<size_t>(experts_used), -1);
    expert_weights.assign(layers * static_cast<size_t>(experts_used), 0.0f);
  }
  // Where a capture step of `layer` writes its row of `width` values.
  float* row(CapturePoint point, int32_t layer, int64_t width) {
    std::vector<float>& rows = point == CapturePoint::LayerInput ? layer_input
                               : point == CapturePoint::Query    ? query
                               : point == CapturePoint::AfterAttention ? after_attention
                                                                       : layer_output;
    return rows.data() + static_cast<size_t>(layer) * static_cast<size_t>(width);
  }
};

// The largest step the engine will run (Engine::start, from EngineConfig): a
// backend that keeps per-step work buffers sizes them for it at start, so a
// step while serving allocates nothing (and cannot run out of memory there).
struct StepLimits {
  int32_t max_tokens = 0;   // new tokens in one step
  int32_t max_seqs = 0;     // sequences in one step
  int32_t max_logits = 0;   // logit rows in one step (a larger step still runs: its buffers grow then)
  int32_t max_context = 0;  // positions one sequence attends over
  int32_t block_size = 16;  // tokens per KV block (a block table's length follows)
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Sizes the step's work buffers for `limits` (an error when the memory
  // cannot be had). Default: nothing to size (buffers of the host, grown as
  // steps need them).
  virtual Status reserve_work(const StepLimits& limits) {
    (void)limits;
    return {};
  }
  // Bytes reserve_work() holds, already outside device_info().memory_free_bytes.
  virtual size_t work_bytes_reserved() const { return 0; }

  // (Re)allocates the KV pool; previous contents are lost. An error (before
  // any allocation) for K/V types this backend cannot run, and when the
  // memory cannot be had.
  virtual Status init_kv_pool(const KvPoolSpec& spec) = 0;
  // The pool's size (reserved), and how much of it is in memory now: a backend
  // that commits pages as blocks are first written (the CPU) holds less than
  // it reserved until the pool has been filled once.
  virtual size_t kv_pool_bytes() const = 0;
  virtual size_t kv_resident_bytes() const { return kv_pool_bytes(); }
  // The KV types this backend's attention reads (for K and for V alike).
  virtual std::vector<WeightType> kv_types() const { return {WeightType::F32}; }
  // Whether this backend keeps a window group (KvPoolSpec::num_window_blocks).
  virtual bool supports_window_group() const { return false; }
  // These blocks hold nothing anyone will read (free, not cached): a backend
  // that commits its pool as it is written may give their memory back. Their
  // slots read as zeros until written again. Default: nothing happens.
  virtual void release_block_memory(std::span<const int32_t> blocks, KvGroup group = KvGroup::Main) {
    (void)blocks;
    (void)group;
  }

  // Runs one step: writes K/V for every new token into the slots its block table
  // names, attends over each sequence's whole context, and writes one row of
  // vocab_size logits per entry of batch.logit_token_indices into `logits`
  // (row-major, (num_logits, vocab_size)).
  virtual Status forward(const BatchLayout& batch, std::span<float> logits) = 0;

  // forward() with the recipe's Capture steps recording token rows.token into
  // `rows` (sized here). For inspection (runtime/inside.h), never on the hot
  // path. Default: an error naming the backend.
  virtual Status forward_capture(const BatchLayout& batch, std::span<float> logits, CaptureRows& rows) {
    (void)batch;
    (void)logits;
    (void)rows;
    return make_error("the " + device_info().backend + " backend cannot capture layer rows");
  }
  // The model's epilogue (final norm, classifier, final soft-cap) over n
  // residual rows x (n, dim): logits (n, vocab_size), each row what forward()
  // gives for a token whose last residual is that row (the logit lens).
  virtual Status epilogue_rows(std::span<const float> x, int32_t n, std::span<float> logits) {
    (void)x;
    (void)n;
    (void)logits;
    return make_error("the " + device_info().backend + " backend cannot run the epilogue on given rows");
  }

  // Copies whole KV blocks (every layer of the group, K and V): pairs of
  // (source, destination) in that group's pool.
  virtual Status copy_blocks(std::span<const std::pair<int32_t, int32_t>> src_dst, KvGroup group = KvGroup::Main) = 0;

  // KV eviction (BatchLayout::kv_slots, kv/kv_cache_manager.h): whether this
  // backend runs batches whose slots are not positions, fills the attention
  // mass, and moves single rows: every main-group layer's K and V row of
  // physical slot src (block * block_size + offset) copied to dst, pairs in
  // order. Default: none of it.
  virtual bool supports_kv_eviction() const { return false; }
  virtual Status move_slots(std::span<const std::pair<int32_t, int32_t>> src_dst) {
    if (src_dst.empty()) return {};
    return make_error("the " + device_info().backend + " backend cannot evict KV (use the CPU backend)");
  }

  // Reads back the K and V rows of one slot for inspection and tests:
  // k and v receive (num_kv_heads * head_dim) floats.
  virtual Status read_kv_slot(int32_t layer, int32_t block, int32_t slot, std::span<float> k,
                              std::span<float> v) const = 0;

  virtual DeviceInfo device_info() const = 0;
};

}  // namespace gb
