// Sizing the KV pool: what a token, a block and a pool cost at the chosen KV
// types, and the plan every command, the server and the workbench start from:
// a context and a pool that fit the memory there is.
//
//   bytes per token = layers x (K row + V row), a row = kv_heads x head_dim values
//                     in its KV type (kernels/cpu/kv_type.h)
//   bytes per block = bytes per token x block_size
//
// e.g. 32 layers, 8 KV heads, head_dim 128, F16 K and V: 32 x 2 x 1024 x 2 =
// 128 KiB per token; q8_0 K and V: 68 KiB.
//
// Thread: pure functions, any thread (available_memory reads /proc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "core/result.h"
#include "cpu/kv_type.h"
#include "model/model_config.h"

namespace gb {

struct KvTypes {
  WeightType k = kernels::kDefaultKvType;
  WeightType v = kernels::kDefaultKvType;
  friend bool operator==(const KvTypes&, const KvTypes&) = default;
};
// "f16/f16" (K/V).
std::string kv_types_name(KvTypes types);
// A KV type by name ("q8_0", case-insensitive), or an error listing the names.
Result<WeightType> parse_kv_type(const std::string& name, const char* option);
// Empty when a model with this config can keep K and V in these types, else why not.
std::string kv_types_unsupported(const ModelConfig& config, KvTypes types);

size_t kv_bytes_per_token(const ModelConfig& config, KvTypes types);
// The same over `num_layers` layers (a layer group's).
size_t kv_bytes_per_token(const ModelConfig& config, KvTypes types, int32_t num_layers);
size_t kv_bytes_per_block(const ModelConfig& config, int32_t block_size, KvTypes types);

struct KvPoolRequest {
  std::optional<int64_t> num_blocks;  // --kv-blocks
  std::optional<int64_t> num_bytes;   // --kv-bytes (rounded down to whole blocks)
  int32_t block_size = 16;
  KvTypes types;
  int32_t num_layers = 0;  // layers the pool holds (a layer group's); 0: every layer
};

// Exactly one of num_blocks / num_bytes must be set; the result has at least one block.
Result<KvPoolSpec> kv_pool_spec(const ModelConfig& config, const KvPoolRequest& request);

// The memory a host (or device) has for a model: what is available, less the
// weights, the work buffers and a margin left to the rest of the system.
struct MemoryBudget {
  size_t available = 0;  // MemAvailable (and a cgroup limit), or free device memory
  size_t weights = 0;    // the weights as the backend will hold them
  size_t work = 0;       // activations, logits and attention scratch
  size_t margin = 0;     // left free
  size_t for_kv() const {
    const size_t used = weights + work + margin;
    return available > used ? available - used : 0;
  }
};
// Bytes the host can still give this process: MemAvailable from /proc/meminfo,
// lowered to the cgroup's memory.max less its memory.current where one is set;
// 0 when neither can be read.
size_t available_host_memory();
// The work buffers of a backend step at these limits (activations of
// max_batch_tokens tokens, logits of max_seqs rows, attention scores).
size_t work_bytes(const ModelConfig& config, int32_t max_batch_tokens, int32_t max_seqs, int32_t context,
                  int32_t threads);
// The budget of a host: available_host_memory() (or `available` when given),
// the margin max(512 MiB, 5% of it).
MemoryBudget host_budget(size_t weights, size_t work, size_t available = 0);
// The budget of a device whose weights are already in its memory: `free`
// (cudaMemGetInfo after loading, plus a KV pool it would replace) is what is
// available, the work buffers of a step come off it, and a margin of
// max(256 MiB, 5% of total) is left to the driver and other users.
MemoryBudget device_budget(size_t free, size_t total, size_t work);

// What a command asks for; every field optional.
struct KvPlanRequest {
  int32_t context = 0;    // --ctx; 0: the model's, lowered to what fits
  int64_t num_blocks = 0; // --kv-blocks; 0: sized from the context
  int64_t num_bytes = 0;  // --kv-bytes
  // Whole contexts the pool holds by default (a one-shot run 1; the workbench
  // several, for branches and comparisons; a server max_seqs / 4). Only the
  // first must fit: more are dropped to what the budget holds.
  int32_t contexts = 1;
  int32_t block_size = 16;
  KvTypes types;
  // A model whose layers do not all slide (ModelConfig::has_window_group)
  // keeps its sliding layers' window in a pool of their own: room for the
  // window of window_seqs sequences plus one prefill chunk of max_chunk tokens
  // (kv/scheduler.h). False: every layer in the one pool.
  bool window_group = false;
  int32_t window_seqs = 1;
  int32_t max_chunk = 512;
  int64_t num_window_blocks = 0;  // the window group's pool exactly; 0: sized as above
};

struct KvPlan {
  int32_t context = 0;         // tokens per request
  int32_t num_blocks = 0;      // the pool (the global layers' with a window group)
  size_t bytes_per_token = 0;  // the pool's layers, K and V
  size_t pool_bytes = 0;       // num_blocks x block bytes
  // The window group (0 blocks: none): the sliding layers' pool.
  int32_t window = 0;                 // its sliding window
  int32_t num_window_layers = 0;
  int32_t num_window_blocks = 0;
  size_t window_bytes_per_token = 0;  // its layers, K and V
  size_t window_pool_bytes = 0;
  size_t total_bytes() const { return pool_bytes + window_pool_bytes; }
  KvTypes types;
  MemoryBudget budget;
  bool context_lowered = false;  // the model's context did not fit
  // One line when the plan is not what was asked for (the context lowered,
  // fewer contexts in the pool), saying how to get more; else empty.
  std::string note;
};

// The context and pool for a model under a budget:
//   --kv-blocks / --kv-bytes   that pool, refused when it exceeds the budget;
//                              the context is --ctx or the model's
//   --ctx N                    N tokens, refused above the model's maximum or
//                              when one context does not fit
//   neither                    the model's context if one fits, else the
//                              largest multiple of 256 tokens that does (a note)
// then a pool of `contexts` contexts, fewer when they do not all fit. With a
// window group, its pool comes first (window_seqs windows, fewer down to one
// when short) and the rest of the budget goes to the global layers.
// Errors name what was asked, what it needs and what there is; nothing is
// allocated. budget.available == 0 (unknown) fits everything.
Result<KvPlan> plan_kv(const ModelConfig& config, const KvPlanRequest& request, const MemoryBudget& budget);

// "1.5 GiB", "640 KiB", "12 B".
std::string format_bytes(size_t bytes);

}  // namespace gb
