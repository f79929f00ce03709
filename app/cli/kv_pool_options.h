// --kv-blocks / --kv-bytes (serve, serve-bench): the KV pool size a user
// gives, added to a command and turned into EngineConfig::num_blocks in one
// place, so both commands check and size it the same way.
#pragma once

#include <cstdint>

#include "core/result.h"
#include "model/model_config.h"
#include "runtime/engine.h"

namespace CLI {
class App;
}

namespace gb::cli {

struct KvPoolOptions {
  int64_t kv_blocks = 0;  // --kv-blocks; 0: not given
  int64_t kv_bytes = 0;   // --kv-bytes; 0: not given
};

void add_kv_pool_options(CLI::App& sub, KvPoolOptions& options);

// When either option was given, sets config.num_blocks for config.block_size
// (kv_pool_spec: bytes are rounded down to whole blocks, bad sizes name the
// option); otherwise leaves config to the engine's default sizing. Errors when
// both are given.
Status apply_kv_pool_options(const KvPoolOptions& options, const ModelConfig& model, EngineConfig& config);

}  // namespace gb::cli
