// Sizing the KV pool: how many blocks a byte budget buys, or how many bytes a
// block count costs. One block holds block_size tokens of K and V in every layer:
//
//   bytes per block = 2 (K and V) x layers x kv_heads x head_dim x bytes per element x block_size
//
// e.g. 32 layers, 32 KV heads, head_dim 128, FP16, block 16: 2*32*32*128*2*16 = 8 MiB.
// The CLI's --kv-blocks / --kv-bytes land here; bad values give a message naming
// the option. kv_pool_blocks is the one pool-sizing policy the engine applies.
//
// Thread: pure functions, any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "backend/backend.h"
#include "core/result.h"
#include "model/model_config.h"

namespace gb {

size_t kv_bytes_per_block(const ModelConfig& config, int32_t block_size, size_t bytes_per_element = sizeof(float));

struct KvPoolRequest {
  std::optional<int64_t> num_blocks;  // --kv-blocks
  std::optional<int64_t> num_bytes;   // --kv-bytes (rounded down to whole blocks)
  int32_t block_size = 16;
  size_t bytes_per_element = sizeof(float);  // the backends store K/V as float
};

// Exactly one of num_blocks / num_bytes must be set; the result has at least one block.
Result<KvPoolSpec> kv_pool_spec(const ModelConfig& config, const KvPoolRequest& request);

// The pool an engine gets (Engine::start, from EngineConfig), first rule that applies:
//   num_blocks > 0     those blocks
//   num_bytes > 0      as many blocks as the bytes buy (kv_pool_spec)
//   full_contexts > 0  that many whole contexts, at least 16 blocks (the workbench:
//                      enough to show sharing, small enough to see)
//   otherwise          room for max_seqs sequences at a quarter of the context
//                      each, and at least one full context (serving)
struct KvPoolPolicy {
  int32_t num_blocks = 0;
  size_t num_bytes = 0;
  int32_t full_contexts = 0;
  int32_t max_seqs = 1;
  int32_t max_context = 0;  // tokens, > 0
  int32_t block_size = 16;
};
Result<int32_t> kv_pool_blocks(const ModelConfig& config, const KvPoolPolicy& policy);

}  // namespace gb
