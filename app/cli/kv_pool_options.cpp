#include "cli/kv_pool_options.h"

#include <CLI/CLI.hpp>

#include "backend/kv_pool_sizing.h"

namespace gb::cli {

void add_kv_pool_options(CLI::App& sub, KvPoolOptions& options) {
  sub.add_option("--kv-blocks", options.kv_blocks, "KV pool size in blocks")->check(CLI::PositiveNumber);
  sub.add_option("--kv-bytes", options.kv_bytes, "KV pool size in bytes")->check(CLI::PositiveNumber);
}

Status apply_kv_pool_options(const KvPoolOptions& options, const ModelConfig& model, EngineConfig& config) {
  if (options.kv_blocks > 0 && options.kv_bytes > 0) return make_error("give --kv-blocks or --kv-bytes, not both");
  if (options.kv_blocks <= 0 && options.kv_bytes <= 0) return {};
  KvPoolRequest pool;
  if (options.kv_blocks > 0) pool.num_blocks = options.kv_blocks;
  else pool.num_bytes = options.kv_bytes;
  pool.block_size = config.block_size;
  pool.types = config.kv_types;
  auto spec = kv_pool_spec(model, pool);
  if (!spec) return spec.error();
  // Bytes stay bytes, so the engine's budget check names the option given.
  if (options.kv_blocks > 0) config.num_blocks = spec->num_blocks;
  else config.kv_bytes = static_cast<size_t>(options.kv_bytes);
  return {};
}

}  // namespace gb::cli
