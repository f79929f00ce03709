#include "backend/kv_pool_sizing.h"

#include <algorithm>
#include <limits>
#include <string>

namespace gb {

size_t kv_bytes_per_block(const ModelConfig& config, int32_t block_size, size_t bytes_per_element) {
  return config.kv_bytes_per_token(bytes_per_element) * static_cast<size_t>(block_size);
}

Result<KvPoolSpec> kv_pool_spec(const ModelConfig& config, const KvPoolRequest& request) {
  if (request.num_blocks.has_value() == request.num_bytes.has_value())
    return make_error("KV pool: give exactly one of --kv-blocks and --kv-bytes");
  if (request.block_size <= 0)
    return make_error("KV pool: block size must be positive, got " + std::to_string(request.block_size));
  const size_t block_bytes = kv_bytes_per_block(config, request.block_size, request.bytes_per_element);
  if (block_bytes == 0) return make_error("KV pool: the model config has no layers or KV heads");
  int64_t num_blocks = 0;
  if (request.num_blocks) {
    num_blocks = *request.num_blocks;
    if (num_blocks <= 0) return make_error("--kv-blocks " + std::to_string(num_blocks) + ": must be at least 1");
  } else {
    const int64_t bytes = *request.num_bytes;
    if (bytes <= 0 || static_cast<uint64_t>(bytes) < block_bytes)
      return make_error("--kv-bytes " + std::to_string(bytes) + ": smaller than one KV block (" +
                        std::to_string(block_bytes) + " bytes for " + std::to_string(request.block_size) +
                        " tokens)");
    num_blocks = static_cast<int64_t>(static_cast<uint64_t>(bytes) / block_bytes);
  }
  if (num_blocks > std::numeric_limits<int32_t>::max())
    return make_error("KV pool: " + std::to_string(num_blocks) + " blocks is more than the pool can index");
  return KvPoolSpec{static_cast<int32_t>(num_blocks), request.block_size};
}

Result<int32_t> kv_pool_blocks(const ModelConfig& config, const KvPoolPolicy& policy) {
  if (policy.num_blocks > 0) return policy.num_blocks;
  if (policy.num_bytes > 0) {
    KvPoolRequest sizing;
    sizing.num_bytes = static_cast<int64_t>(policy.num_bytes);
    sizing.block_size = policy.block_size;
    auto spec = kv_pool_spec(config, sizing);
    if (!spec) return spec.error();
    return spec->num_blocks;
  }
  const int32_t per_ctx = (policy.max_context + policy.block_size - 1) / policy.block_size;
  if (policy.full_contexts > 0) return std::max(16, policy.full_contexts * per_ctx);
  return std::max(per_ctx, per_ctx * std::max(1, policy.max_seqs) / 4);
}

}  // namespace gb
